package sim

import (
	"fmt"
	"time"
)

// Lambda is the Lambda executor behind an SQS event source mapping. Its
// concurrency at a time after the first message is the least of:
//   - the event source's ramp: ESMInitial concurrent batches, plus
//     ESMPerMinute a minute (AWS: starts at 5, adds up to 300 a minute),
//     up to MaxConcurrency (the mapping's MaximumConcurrency, 2 to 1,000);
//   - the function's scaling rate: ScalePer10s more execution
//     environments every 10 seconds (AWS, since November 2023: 1,000);
//   - Reserved (when set) and AccountLimit (the Region's concurrency).
//
// An invocation takes up to BatchSize messages and runs their tasks at
// once; a new execution environment first pays ColdStart. Overhead is an
// invocation's own time besides its tasks' requests: the hand-off from
// the poller, the batched count's linger, the messages' deletion.
type Lambda struct {
	BatchSize      int
	MaxConcurrency int
	Reserved       int
	AccountLimit   int
	ESMInitial     int
	ESMPerMinute   int
	ScalePer10s    int
	ColdStart      time.Duration
	Overhead       time.Duration
	MemoryMB       float64
}

// Concurrency limit causes, as Limit names them.
const (
	LimitESMRamp        = "Lambda event source ramp"
	LimitFunctionRamp   = "Lambda function scaling rate"
	LimitMaxConcurrency = "Lambda event source MaximumConcurrency"
	LimitReserved       = "Lambda reserved concurrency"
	LimitAccount        = "Lambda account concurrency"
)

// Limit is the concurrency allowed since seconds after the first message
// arrived, and the setting or rate that sets it.
func (l Lambda) Limit(since float64) (int, string) {
	n, why := l.ESMInitial+int(float64(l.ESMPerMinute)*since/60), LimitESMRamp
	for _, c := range []struct {
		n   int
		why string
	}{
		{l.MaxConcurrency, LimitMaxConcurrency},
		{l.ScalePer10s * (1 + int(since/10)), LimitFunctionRamp},
		{l.Reserved, LimitReserved},
		{l.AccountLimit, LimitAccount},
	} {
		if c.n > 0 && c.n < n {
			n, why = c.n, c.why
		}
	}
	return n, why
}

func (l Lambda) check() error {
	if l.BatchSize < 1 || l.BatchSize > 10 {
		return fmt.Errorf("sim: Lambda.BatchSize %d: must be between 1 and 10 (an SQS batch)", l.BatchSize)
	}
	if l.MaxConcurrency < 2 || l.MaxConcurrency > 1000 {
		return fmt.Errorf("sim: Lambda.MaxConcurrency %d: must be between 2 and 1000", l.MaxConcurrency)
	}
	if l.ESMInitial < 1 || l.ESMPerMinute < 1 || l.ScalePer10s < 1 {
		return fmt.Errorf("sim: Lambda.ESMInitial, ESMPerMinute and ScalePer10s must be positive")
	}
	return nil
}

// Slots are long-polling executor slots, each running one task at a time:
// the local runner's, or a Fargate service's (containers × slots each),
// usable StartAfter the first message (Fargate: the backlog alarm, the
// scaling step and the containers' start, tens of seconds).
type Slots struct {
	Count      int
	StartAfter time.Duration
	// Receivers, when set, is how many receives may be in flight at once
	// (the local runner: one a queue); 0, as many as free slots ask.
	Receivers int
	// Containers and their size, for the cost: Count/PerContainer
	// containers of VCPU and MemoryGB each, billed from their start to the
	// job's end. 0 PerContainer: no compute cost (the local runner).
	PerContainer   int
	VCPU, MemoryGB float64
}

// LimitSlots names a slots executor's limit.
const LimitSlots = "executor slots"
