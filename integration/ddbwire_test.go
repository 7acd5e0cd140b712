package integration

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/ddbwire"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A fault injected through the lean DynamoDB client's hook port reaches
// the store as an SDK client's did: the claim's conditional UpdateItem
// applies, its answer is lost, the client retries it, the retry fails the
// condition the first attempt set, and the claim's read-back grants it.
// The store here is built on ddbwire.New itself, whatever
// BATCHWORK_DYNAMO_CLIENT says, and the request counter installed beside
// the injector sees the call once and the read-back.
func TestLeanClientCarriesInjectedFaults(t *testing.T) {
	t.Parallel()
	inj := faults.New(1)
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, faults: inj})
	id := e.submit("lean", []byte(oneStage("lean", "x", 1)))

	cfg := e.cfg.Copy()
	db, err := ddbwire.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	svc := control.New(control.Config{Queues: e.r.Resources.Queues}, dynamo.New(db, e.r.Resources.Table), e.r.Queue, e.r.Blob, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	inj.Once(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.Lost, Match: func(_ string, in any) bool {
		u, ok := in.(*dynamodb.UpdateItemInput)
		return ok && u.UpdateExpression != nil && strings.Contains(*u.UpdateExpression, "tok = :tok, lease = :lease")
	}})
	c, err := svc.Claim(context.Background(), domain.TaskRef{Job: id})
	if err != nil {
		t.Fatalf("claim with a lost response: %v", err)
	}
	if n := inj.Counts()["DynamoDB.UpdateItem lost"]; n != 1 {
		t.Fatalf("%d lost UpdateItem answers, want 1:\n%s", n, inj)
	}
	task, err := e.r.Store.TaskGet(context.Background(), c.Task.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if c.Task.Attempt != 1 || task.Token != c.Task.Token || task.State != sm.TaskClaimed {
		t.Fatalf("claim attempt %d, task %s with token %q; want attempt 1 held by the claim's token %q", c.Task.Attempt, task.State, task.Token, c.Task.Token)
	}
}
