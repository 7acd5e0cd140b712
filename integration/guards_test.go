package integration

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

// The task lifecycle's guards exist twice: in memory (statemachine.Decide,
// which explains refusals) and as DynamoDB conditions (shared/dynamo,
// built from the same tables). This test writes task records of every
// kind straight into the table, applies each event through the store, and
// checks that DynamoDB accepted exactly the events Decide allows.
func TestStoreConditionsAgreeWithGuards(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	db := dynamodb.NewFromConfig(e.cfg)
	store := e.r.Store
	now := time.Now().UTC().Truncate(time.Millisecond)
	const job, tok, other, copyTok = "jguards", "tokA", "tokB", "tokC"
	if err := store.ShardPut(ctx, job, 0, 1000, 1); err != nil {
		t.Fatal(err)
	}

	live, expired, inSkew := now.Add(time.Minute), now.Add(-sm.LeaseSkew-time.Second), now.Add(-sm.LeaseSkew/2)
	records := []struct {
		name string
		view sm.TaskView
	}{
		{"ready", sm.TaskView{State: sm.TaskReady, Attempt: 0, MaxAttempts: 3}},
		{"ready in backoff", sm.TaskView{State: sm.TaskReady, Attempt: 1, MaxAttempts: 3, NotBefore: now.Add(time.Minute), Token: tok}},
		{"ready after backoff", sm.TaskView{State: sm.TaskReady, Attempt: 1, MaxAttempts: 3, NotBefore: now.Add(-time.Second), Token: tok}},
		{"claimed live", sm.TaskView{State: sm.TaskClaimed, Attempt: 1, MaxAttempts: 3, Token: tok, LeaseUntil: live}},
		{"claimed expired", sm.TaskView{State: sm.TaskClaimed, Attempt: 1, MaxAttempts: 3, Token: tok, LeaseUntil: expired}},
		{"claimed within skew", sm.TaskView{State: sm.TaskClaimed, Attempt: 1, MaxAttempts: 3, Token: tok, LeaseUntil: inSkew}},
		{"last attempt live", sm.TaskView{State: sm.TaskClaimed, Attempt: 3, MaxAttempts: 3, Token: tok, LeaseUntil: live}},
		{"last attempt expired", sm.TaskView{State: sm.TaskClaimed, Attempt: 3, MaxAttempts: 3, Token: tok, LeaseUntil: expired}},
		{"succeeded", sm.TaskView{State: sm.TaskSucceeded, Attempt: 1, MaxAttempts: 3, Token: tok}},
		{"failed", sm.TaskView{State: sm.TaskFailed, Attempt: 3, MaxAttempts: 3, Token: tok}},
		{"cancelled", sm.TaskView{State: sm.TaskCancelled, Attempt: 1, MaxAttempts: 3, Token: tok}},
		// Checkpoints and continuations (shared/dynamo/checkpoint.go).
		{"checkpointed", sm.TaskView{State: sm.TaskClaimed, Attempt: 2, MaxAttempts: 3, Token: tok, LeaseUntil: live, CheckpointAttempt: 2}},
		{"checkpointed by an earlier attempt", sm.TaskView{State: sm.TaskClaimed, Attempt: 2, MaxAttempts: 3, Token: tok, LeaseUntil: live, CheckpointAttempt: 1}},
		{"checkpointed, no continuations left", sm.TaskView{State: sm.TaskClaimed, Attempt: 2, MaxAttempts: 3, Token: tok, LeaseUntil: live,
			CheckpointAttempt: 2, Continuations: sm.MaxContinuations}},
		{"ready, checkpointed", sm.TaskView{State: sm.TaskReady, Attempt: 2, MaxAttempts: 3, Token: tok, CheckpointAttempt: 2}},
		// Speculative copies (statemachine/speculation.go).
		{"copy requested", sm.TaskView{State: sm.TaskClaimed, Attempt: 1, MaxAttempts: 3, Token: tok, LeaseUntil: live,
			Copy: sm.CopyView{Requested: true}}},
		{"copied live", sm.TaskView{State: sm.TaskClaimed, Attempt: 2, MaxAttempts: 4, Token: tok, LeaseUntil: live,
			Copy: sm.CopyView{Requested: true, Started: true, Token: copyTok, LeaseUntil: live}}},
		{"copied, copy expired", sm.TaskView{State: sm.TaskClaimed, Attempt: 2, MaxAttempts: 4, Token: tok, LeaseUntil: live,
			Copy: sm.CopyView{Requested: true, Started: true, Token: copyTok, LeaseUntil: expired}}},
		{"copied, holder expired", sm.TaskView{State: sm.TaskClaimed, Attempt: 2, MaxAttempts: 4, Token: tok, LeaseUntil: expired,
			Copy: sm.CopyView{Requested: true, Started: true, Token: copyTok, LeaseUntil: live}}},
		{"copied on the last attempt, both expired", sm.TaskView{State: sm.TaskClaimed, Attempt: 4, MaxAttempts: 4, Token: tok, LeaseUntil: expired,
			Copy: sm.CopyView{Requested: true, Started: true, Token: copyTok, LeaseUntil: expired}}},
		{"copy dropped", sm.TaskView{State: sm.TaskClaimed, Attempt: 2, MaxAttempts: 4, Token: tok, LeaseUntil: expired,
			Copy: sm.CopyView{Requested: true, Started: true}}},
		// The holder's checkpoint beside its copy (patt = Attempt-1, as
		// putTaskRecord writes it): continuable once the copy ended.
		{"copied live, holder checkpointed", sm.TaskView{State: sm.TaskClaimed, Attempt: 2, MaxAttempts: 4, Token: tok, LeaseUntil: live,
			CheckpointAttempt: 1, Copy: sm.CopyView{Requested: true, Started: true, Token: copyTok, LeaseUntil: live, HolderAttempt: 1}}},
		{"copy dropped, holder checkpointed", sm.TaskView{State: sm.TaskClaimed, Attempt: 2, MaxAttempts: 4, Token: tok, LeaseUntil: live,
			CheckpointAttempt: 1, Copy: sm.CopyView{Requested: true, Started: true, HolderAttempt: 1}}},
		{"succeeded after a copy", sm.TaskView{State: sm.TaskSucceeded, Attempt: 2, MaxAttempts: 4, Token: copyTok,
			Copy: sm.CopyView{Requested: true, Started: true}}},
	}
	// Each event as the store applies it, with the caller's token where
	// the event is the holder's.
	type op struct {
		name  string
		ev    sm.Event
		token string
		apply func(ref domain.TaskRef, v sm.TaskView) error
	}
	holder := func(tk string) dynamo.HolderParams { return dynamo.HolderParams{Token: tk, Now: now} }
	ops := []op{
		{"claim", "", "", func(ref domain.TaskRef, _ sm.TaskView) error {
			_, err := store.TaskClaim(ctx, dynamo.ClaimParams{Ref: ref, Token: "fresh", Now: now, Lease: time.Minute})
			return err
		}},
		{"heartbeat by holder", sm.TaskHeartbeat, tok, func(ref domain.TaskRef, _ sm.TaskView) error {
			p := holder(tok)
			p.Ref = ref
			return store.TaskHeartbeat(ctx, p, time.Minute, time.Minute)
		}},
		{"heartbeat by stale executor", sm.TaskHeartbeat, other, func(ref domain.TaskRef, _ sm.TaskView) error {
			p := holder(other)
			p.Ref = ref
			return store.TaskHeartbeat(ctx, p, time.Minute, time.Minute)
		}},
		{"commit by holder", sm.TaskCommit, tok, func(ref domain.TaskRef, v sm.TaskView) error {
			p := holder(tok)
			p.Ref = ref
			_, err := store.TaskCommit(ctx, dynamo.CommitParams{HolderParams: p, Attempt: v.Attempt, Shards: 1})
			return err
		}},
		{"commit by stale executor", sm.TaskCommit, other, func(ref domain.TaskRef, v sm.TaskView) error {
			p := holder(other)
			p.Ref = ref
			_, err := store.TaskCommit(ctx, dynamo.CommitParams{HolderParams: p, Attempt: v.Attempt, Shards: 1})
			return err
		}},
		{"retry by holder", sm.TaskRetry, tok, func(ref domain.TaskRef, _ sm.TaskView) error {
			p := holder(tok)
			p.Ref = ref
			_, err := store.TaskRelease(ctx, dynamo.ReleaseParams{HolderParams: p, Event: sm.TaskRetry, NotBefore: now, Due: now})
			return err
		}},
		{"fail by holder", sm.TaskFail, tok, func(ref domain.TaskRef, _ sm.TaskView) error {
			p := holder(tok)
			p.Ref = ref
			_, err := store.TaskRelease(ctx, dynamo.ReleaseParams{HolderParams: p, Event: sm.TaskFail, Due: now})
			return err
		}},
		{"permanent failure by holder", sm.TaskFailPermanent, tok, func(ref domain.TaskRef, _ sm.TaskView) error {
			p := holder(tok)
			p.Ref = ref
			_, err := store.TaskRelease(ctx, dynamo.ReleaseParams{HolderParams: p, Event: sm.TaskFailPermanent, Class: domain.ClassPermanent, Due: now})
			return err
		}},
		{"permanent failure by stale executor", sm.TaskFailPermanent, other, func(ref domain.TaskRef, _ sm.TaskView) error {
			p := holder(other)
			p.Ref = ref
			_, err := store.TaskRelease(ctx, dynamo.ReleaseParams{HolderParams: p, Event: sm.TaskFailPermanent, Class: domain.ClassPermanent, Due: now})
			return err
		}},
	}
	ops = append(ops,
		op{"speculate", sm.TaskSpeculate, "", func(ref domain.TaskRef, _ sm.TaskView) error {
			return store.CopyRequest(ctx, ref, now)
		}},
		op{"claim copy", sm.TaskClaimCopy, "", func(ref domain.TaskRef, _ sm.TaskView) error {
			_, err := store.CopyClaim(ctx, dynamo.ClaimParams{Ref: ref, Token: "freshcopy", Now: now, Lease: time.Minute})
			return err
		}},
		op{"copy heartbeat by copy", sm.TaskCopyHeartbeat, copyTok, func(ref domain.TaskRef, _ sm.TaskView) error {
			p := holder(copyTok)
			p.Ref = ref
			return store.CopyHeartbeat(ctx, p, time.Minute, time.Minute)
		}},
		op{"copy heartbeat by holder", sm.TaskCopyHeartbeat, tok, func(ref domain.TaskRef, _ sm.TaskView) error {
			p := holder(tok)
			p.Ref = ref
			return store.CopyHeartbeat(ctx, p, time.Minute, time.Minute)
		}},
		op{"commit by copy", sm.TaskCommit, copyTok, func(ref domain.TaskRef, v sm.TaskView) error {
			p := holder(copyTok)
			p.Ref = ref
			_, err := store.TaskCommit(ctx, dynamo.CommitParams{HolderParams: p, Attempt: v.Attempt, Shards: 1, Duration: time.Second})
			return err
		}},
		op{"yield by holder", sm.TaskYield, tok, func(ref domain.TaskRef, _ sm.TaskView) error {
			p := holder(tok)
			p.Ref = ref
			_, err := store.TaskDropClaim(ctx, dynamo.DropParams{HolderParams: p, Event: sm.TaskYield, Copy: domain.CopyState{Token: copyTok}})
			return err
		}},
		op{"copy fail by copy", sm.TaskCopyFail, copyTok, func(ref domain.TaskRef, _ sm.TaskView) error {
			p := holder(copyTok)
			p.Ref = ref
			_, err := store.TaskDropClaim(ctx, dynamo.DropParams{HolderParams: p, Event: sm.TaskCopyFail})
			return err
		}},
		op{"copy fail by holder", sm.TaskCopyFail, tok, func(ref domain.TaskRef, _ sm.TaskView) error {
			p := holder(tok)
			p.Ref = ref
			_, err := store.TaskDropClaim(ctx, dynamo.DropParams{HolderParams: p, Event: sm.TaskCopyFail})
			return err
		}},
		op{"copy expire", sm.TaskCopyExpire, "", func(ref domain.TaskRef, _ sm.TaskView) error {
			_, err := store.TaskDropClaim(ctx, dynamo.DropParams{HolderParams: dynamo.HolderParams{Ref: ref, Now: now}, Event: sm.TaskCopyExpire})
			return err
		}},
	)
	for _, tk := range []struct{ name, tok string }{{"holder", tok}, {"stale executor", other}} {
		ops = append(ops,
			op{"checkpoint by " + tk.name, sm.TaskCheckpoint, tk.tok, func(ref domain.TaskRef, v sm.TaskView) error {
				p := holder(tk.tok)
				p.Ref = ref
				return store.TaskCheckpoint(ctx, dynamo.CheckpointParams{HolderParams: p, Attempt: v.Attempt, Seq: 1, Offset: 10})
			}},
			op{"continue by " + tk.name, sm.TaskContinue, tk.tok, func(ref domain.TaskRef, _ sm.TaskView) error {
				p := holder(tk.tok)
				p.Ref = ref
				_, err := store.TaskContinue(ctx, dynamo.ContinueParams{HolderParams: p, Due: now})
				return err
			}})
	}
	// The owner's cancel of one task (statemachine/taskcancel.go): no token.
	ops = append(ops, op{"owner cancel", sm.TaskOwnerCancel, "", func(ref domain.TaskRef, _ sm.TaskView) error {
		_, err := store.TaskCancel(ctx, dynamo.TaskCancelParams{Ref: ref, Now: now, Err: "task s/0 cancelled by tester", Due: now})
		return err
	}})
	holderOf := map[int]time.Time{} // op index -> the holder's liveness
	for _, ev := range []sm.Event{sm.TaskExpire, sm.TaskExhaust, sm.TaskCancel} {
		ops = append(ops, op{string(ev), ev, "", func(ref domain.TaskRef, _ sm.TaskView) error {
			return store.TaskSweep(ctx, dynamo.SweepTaskParams{Ref: ref, Event: ev, Now: now, Due: now})
		}})
	}

	// Takeovers check the holder's liveness record, in three kinds.
	holders := []struct {
		name  string
		alive time.Time // zero: no record
	}{{"holder alive", now.Add(time.Minute)}, {"holder dead", now.Add(-sm.LivenessSkew - time.Second)}, {"holder within skew", now.Add(-sm.LivenessSkew / 2)}, {"holder without record", time.Time{}}}
	for i, h := range holders {
		ex := fmt.Sprintf("exguard%d", i)
		if !h.alive.IsZero() {
			if err := store.ExecutorRenew(ctx, ex, h.alive); err != nil {
				t.Fatal(err)
			}
		}
		ops = append(ops, op{"takeover from " + h.name, sm.TaskTakeover, "", func(ref domain.TaskRef, _ sm.TaskView) error {
			_, err := store.TaskTakeover(ctx, dynamo.TakeoverParams{
				ClaimParams: dynamo.ClaimParams{Ref: ref, Token: "fresh", Now: now, Lease: time.Minute},
				Holder:      domain.Task{Ref: ref, Token: tok, Executor: ex},
			})
			return err
		}})
		holderOf[len(ops)-1] = h.alive
		// A holder killed for memory goes back to READY one size up
		// (statemachine/oomkill.go), on the takeover's guards.
		ops = append(ops, op{"lost for memory from " + h.name, sm.TaskLostForMemory, "", func(ref domain.TaskRef, _ sm.TaskView) error {
			_, err := store.TaskLoseForMemory(ctx, dynamo.LostForMemoryParams{
				Holder: domain.Task{Ref: ref, Token: tok, Executor: ex}, Now: now, Memory: 2 << 30, Err: "out of memory", Due: now,
			})
			return err
		}})
		holderOf[len(ops)-1] = h.alive
	}

	partition := 0
	for _, rec := range records {
		for i, o := range ops {
			ref := domain.TaskRef{Job: job, Stage: 0, Partition: partition}
			view := rec.view
			view.HolderAlive = holderOf[i]
			partition++
			t.Run(rec.name+"/"+o.name, func(t *testing.T) {
				putTaskRecord(t, db, e.r.Resources.Table, ref, rec.view)
				var allowed bool
				if o.ev == "" { // a claim is either event: claim or reclaim
					_, errClaim := sm.Decide(rec.view, sm.TaskClaim, sm.TaskInput{At: now})
					_, errReclaim := sm.Decide(rec.view, sm.TaskReclaim, sm.TaskInput{At: now})
					allowed = errClaim == nil || errReclaim == nil
				} else {
					_, err := sm.Decide(view, o.ev, sm.TaskInput{At: now, Token: o.token})
					allowed = err == nil
				}
				err := o.apply(ref, rec.view)
				if got := err == nil; got != allowed {
					t.Fatalf("DynamoDB accepted=%v (err %v), statemachine allows=%v", got, err, allowed)
				}
			})
		}
	}
}

// putTaskRecord writes a task record as it is stored, with the attribute
// names of shared/dynamo's codec, whatever state it is in.
func putTaskRecord(t *testing.T, db *dynamodb.Client, table string, ref domain.TaskRef, v sm.TaskView) {
	t.Helper()
	n := func(x int64) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(x, 10)}
	}
	item := map[string]types.AttributeValue{
		"pk":  &types.AttributeValueMemberS{Value: fmt.Sprintf("TASK#%s#%d#%d", ref.Job, ref.Stage, ref.Partition/dynamo.TaskBucket)},
		"sk":  &types.AttributeValueMemberS{Value: fmt.Sprintf("%06d", ref.Partition)},
		"st":  &types.AttributeValueMemberS{Value: string(v.State)},
		"att": n(int64(v.Attempt)), "mx": n(int64(v.MaxAttempts)),
		"upd": n(time.Now().UnixMilli()),
	}
	if v.Token != "" {
		item["tok"] = &types.AttributeValueMemberS{Value: v.Token}
	}
	if !v.LeaseUntil.IsZero() {
		item["lease"] = n(v.LeaseUntil.UnixMilli())
	}
	if !v.NotBefore.IsZero() {
		item["nb"] = n(v.NotBefore.UnixMilli())
	}
	// A speculative copy (shared/dynamo/speculation.go).
	if v.CheckpointAttempt > 0 {
		item["ka"] = n(int64(v.CheckpointAttempt))
	}
	if v.Continuations > 0 {
		item["kc"] = n(int64(v.Continuations))
	}
	if v.Copy.Requested {
		item["xreq"] = n(time.Now().UnixMilli())
	}
	if v.Copy.Started {
		item["xat"] = n(time.Now().UnixMilli())
		item["patt"] = n(int64(v.Attempt - 1))
	}
	if v.Copy.Token != "" {
		item["xtok"] = &types.AttributeValueMemberS{Value: v.Copy.Token}
		item["xlease"] = n(v.Copy.LeaseUntil.UnixMilli())
	}
	if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
		t.Fatal(err)
	}
}

// A commit that emptied a counter shard hurries its stage's next sweep
// look (HurryStage): only forward, and only while the stage RUNS, so a
// hint that lands after another committer completed the stage (or after
// a cancel) never puts it back in the sweep index.
func TestHurryStageOnlyPullsRunningStagesForward(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	db := dynamodb.NewFromConfig(e.cfg)
	due := func(job string, stage int) time.Time {
		t.Helper()
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &e.r.Resources.Table, ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "JOB#" + job}, "sk": &types.AttributeValueMemberS{Value: fmt.Sprintf("STAGE#%02d", stage)}}})
		if err != nil {
			t.Fatal(err)
		}
		if out.Item == nil {
			t.Fatalf("no stage %s/%d", job, stage)
		}
		n, ok := out.Item["due"].(*types.AttributeValueMemberN)
		if !ok {
			return time.Time{}
		}
		ms, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return time.UnixMilli(ms).UTC()
	}
	spec := []byte(`{"name":"hurry","stages":[{"name":"a","task":"work","partitions":{"count":1}},{"name":"b","task":"work","after":["a"],"partitions":{"count":1}}]}`)
	job := e.submit("hurry", spec)
	store := e.r.Store

	running := due(job, 0)
	if running.IsZero() {
		t.Fatal("the running stage is not in the sweep index")
	}
	// Never pushed back.
	if err := store.StageHurry(ctx, job, 0, running.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := due(job, 0); !got.Equal(running) {
		t.Fatalf("due %v after a later hint, want %v kept", got, running)
	}
	// Pulled forward.
	sooner := running.Add(-time.Second).Truncate(time.Millisecond)
	if err := store.StageHurry(ctx, job, 0, sooner); err != nil {
		t.Fatal(err)
	}
	if got := due(job, 0); !got.Equal(sooner) {
		t.Fatalf("due %v after an earlier hint, want %v", got, sooner)
	}
	// A stage that is not running is left alone.
	blocked := due(job, 1)
	if err := store.StageHurry(ctx, job, 1, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := due(job, 1); !got.Equal(blocked) {
		t.Fatalf("blocked stage's due %v after a hint, want %v kept", got, blocked)
	}
	if _, err := e.r.Service.Cancel(ctx, "tester", job); err != nil {
		t.Fatal(err)
	}
	ended := due(job, 0)
	if err := store.StageHurry(ctx, job, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := due(job, 0); !got.Equal(ended) {
		t.Fatalf("cancelled stage's due %v after a hint, want %v kept", got, ended)
	}
}
