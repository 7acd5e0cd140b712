package integration

import (
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
)

// An idle timer queue costs one long poll per wait, not one per receiver
// the runner keeps for a burst: eight receivers polling an empty queue
// were a tenth of a core of the emulator per test environment. The
// window is counted in whole polls: with the 2 s wait, 6 s hold at most
// three rounds of polls (four with a round cut by the window's ends), so
// one receiver makes at most four receives and eight would make 24 or
// more.
func TestIdleTimerQueueIsPolledOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var timerURL string
	counting := false
	receives := 0
	inj := faults.New(1)
	inj.Add(faults.Rule{Service: "SQS", Operation: "ReceiveMessage", Kind: faults.Throttle, Match: func(_ string, in any) bool {
		r, ok := in.(*sqs.ReceiveMessageInput)
		mu.Lock()
		defer mu.Unlock()
		if ok && counting && r.QueueUrl != nil && *r.QueueUrl == timerURL {
			receives++
		}
		return false
	}})
	e := newEnv(t, batchwork.NewRegistry(), envOptions{faults: inj})
	mu.Lock()
	timerURL = e.r.Resources.Queues.Timer
	counting = true
	mu.Unlock()
	const window = 6 * time.Second
	time.Sleep(window) // the span the polls are counted over; nothing waits on it
	mu.Lock()
	defer mu.Unlock()
	if timerURL == "" {
		t.Fatal("the environment has no timer queue")
	}
	if receives == 0 || receives > 4 {
		t.Fatalf("%d receives on the idle timer queue in %s with a 2 s wait; want 1 to 4 (one receiver)", receives, window)
	}
}
