package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/batchwork/batchwork/internal/iamrec"
	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// recordsOf scans the whole table for the records of a job: any item whose
// key names it, or that points at it (an idempotency record). It returns
// their keys, sorted. Event outbox entries (OBX#, shared/events) are left
// out: they are the events' until published, and the sweep publishes and
// deletes them.
func recordsOf(t *testing.T, e *env, id string) []string {
	t.Helper()
	db := dynamodb.NewFromConfig(e.cfg)
	in := &dynamodb.ScanInput{
		TableName:                 &e.r.Resources.Table,
		FilterExpression:          aws.String("contains(pk, :id) OR contains(sk, :id) OR #job = :id"),
		ExpressionAttributeNames:  map[string]string{"#job": "job"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": &types.AttributeValueMemberS{Value: id}},
		ConsistentRead:            aws.Bool(true),
	}
	var keys []string
	for {
		out, err := db.Scan(context.Background(), in)
		if err != nil {
			t.Fatalf("scan for %s: %v", id, err)
		}
		for _, it := range out.Items {
			if pk := it["pk"].(*types.AttributeValueMemberS).Value; len(pk) > 4 && pk[:4] == "OBX#" {
				continue
			}
			keys = append(keys, it["pk"].(*types.AttributeValueMemberS).Value+" "+it["sk"].(*types.AttributeValueMemberS).Value)
		}
		if out.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	sort.Strings(keys)
	return keys
}

// kindsOf says which kinds of record keys holds (the partition key's
// prefix, or the sort key's for the job partition).
func kindsOf(keys []string) []string {
	seen := map[string]bool{}
	for _, k := range keys {
		kind := k[:max(0, indexOf(k, '#'))]
		if kind == "JOB" {
			kind += " " + k[indexOf(k, ' ')+1:min(len(k), indexOf(k, ' ')+6)]
		}
		seen[kind] = true
	}
	var kinds []string
	for k := range seen {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}

func indexOf(s string, c byte) int {
	for i := range len(s) {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// DELETE /jobs/{id} deletes every record of an ended job of the caller's
// (a scan of the table finds nothing that names it) and every object
// under its area, touches no other job, and leaves the job unknown: a
// second DELETE, a GET and the list answer as for a job that never was,
// and a submit with its Idempotency-Key creates a new job. Another
// owner's DELETE is a 404 and deletes nothing; a running job is a 409. A
// deletion stopped after its data step (as by a crash) already hides the
// job, and a repeat of the DELETE finishes it.
func TestDeleteJob(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("emit", func(_ context.Context, tk *batchwork.Task) error {
		if tk.Stage == "map" && tk.Partition == 0 && tk.Attempt == 1 {
			return errors.New("first attempt fails") // an attempt-end record and a timeline event
		}
		_, err := fmt.Fprintf(tk.Out, "%s %d\n", tk.Stage, tk.Partition)
		return err
	})
	reg.Register("block", func(ctx context.Context, _ *batchwork.Task) error {
		<-ctx.Done()
		return ctx.Err()
	})
	e := newEnv(t, reg, envOptions{})
	const alice, bob = "alice", "bob"
	spec := func(name string) []byte {
		return []byte(fmt.Sprintf(`{"name":%q,"retry":{"maxAttempts":3,"backoff":"1s"},"maxConcurrency":4,"stages":[`+
			`{"name":"map","task":"emit","partitions":{"count":3},"shuffle":{"partitions":2}},`+
			`{"name":"reduce","task":"emit","after":["map"]}]}`, name))
	}
	done := e.submitAs(alice, "done-key", spec("done"))
	kept := e.submitAs(alice, "kept-key", spec("kept"))
	halfway := e.submitAs(alice, "halfway-key", spec("halfway"))
	running := e.submitAs(alice, "running-key", []byte(`{"name":"running","stages":[{"name":"s","task":"block","partitions":{"count":1}}]}`))
	for _, id := range []string{done, kept, halfway} {
		if st := e.waitJobAs(alice, id, time.Minute); st.State != string(sm.JobSucceeded) {
			t.Fatalf("job %s %s (%s), want SUCCEEDED", id, st.State, st.Error)
		}
	}
	records := recordsOf(t, e, done)
	// Every kind of record a job has: idempotency, job, stages, slots,
	// tasks and their ready markers, counters, state copies, owner list
	// entry, attempt ends and timeline events.
	wantKinds := []string{"ATT", "CNT", "EVT", "IDEM", "JOB JOB", "JOB SLOTS", "JOB STAGE", "JST", "OWN", "RDY", "TASK"}
	if got := kindsOf(records); !slices.Equal(got, wantKinds) {
		t.Fatalf("records of the job: kinds %v, want %v:\n%v", got, wantKinds, records)
	}
	objects := keysUnder(t, e, blob.JobPrefix(done))
	if len(objects) < 6 {
		t.Fatalf("%d objects under the job, want its plans, outputs and manifests", len(objects))
	}
	keptRecords, keptObjects := recordsOf(t, e, kept), keysUnder(t, e, blob.JobPrefix(kept))
	ghost := "j000000000000000000000"
	path := func(id string) string { return "/jobs/" + id }

	steps := []struct {
		name   string
		owner  string
		id     string
		status int
		code   string
	}{
		{name: "another owner's job", owner: bob, id: done, status: http.StatusNotFound, code: "not_found"},
		{name: "no such job", owner: alice, id: ghost, status: http.StatusNotFound, code: "not_found"},
		{name: "a running job", owner: alice, id: running, status: http.StatusConflict, code: "job_running"},
		{name: "the owner's ended job", owner: alice, id: done, status: http.StatusOK},
		{name: "again", owner: alice, id: done, status: http.StatusNotFound, code: "not_found"},
		{name: "another owner after the deletion", owner: bob, id: done, status: http.StatusNotFound, code: "not_found"},
	}
	for _, s := range steps {
		r := e.call(s.owner, http.MethodDelete, path(s.id), nil)
		if r.Status != s.status {
			t.Fatalf("%s: DELETE %s as %s: %d %s, want %d", s.name, path(s.id), s.owner, r.Status, r.Body, s.status)
		}
		if s.code != "" {
			if got := r.apiErr(t).Code; got != s.code {
				t.Errorf("%s: error code %q, want %q", s.name, got, s.code)
			}
			if s.name == "another owner's job" {
				if got := recordsOf(t, e, done); !slices.Equal(got, records) {
					t.Fatalf("another owner's DELETE changed the records: %v, were %v", got, records)
				}
				if got := keysUnder(t, e, blob.JobPrefix(done)); !slices.Equal(got, objects) {
					t.Fatalf("another owner's DELETE changed the objects: %v, were %v", got, objects)
				}
			}
			continue
		}
		var d control.JobDeletion
		dec := json.NewDecoder(bytes.NewReader(r.Body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("%s: decode %s: %v", s.name, r.Body, err)
		}
		if d.Job != done || d.State != string(sm.JobSucceeded) || !d.Complete || d.Objects != len(objects) || d.Records != len(records) {
			t.Errorf("deletion %+v, want %s SUCCEEDED complete, %d objects and %d records", d, done, len(objects), len(records))
		}
	}
	if left := recordsOf(t, e, done); len(left) != 0 {
		t.Errorf("records left of the deleted job: %v", left)
	}
	if left := keysUnder(t, e, blob.JobPrefix(done)); len(left) != 0 {
		t.Errorf("objects left of the deleted job: %v", left)
	}
	if got := recordsOf(t, e, kept); !slices.Equal(got, keptRecords) {
		t.Errorf("another job's records changed: %v, were %v", got, keptRecords)
	}
	if got := keysUnder(t, e, blob.JobPrefix(kept)); !slices.Equal(got, keptObjects) {
		t.Errorf("another job's objects changed: %v, were %v", got, keptObjects)
	}
	for _, p := range []string{"", "/tasks", "/history", "/manifest"} {
		if r := e.call(alice, http.MethodGet, path(done)+p, nil); r.Status != http.StatusNotFound {
			t.Errorf("GET %s after the deletion: %d %s, want 404", path(done)+p, r.Status, r.Body)
		}
	}
	listed := func(id string) bool {
		var l control.JobList
		e.callJSON(alice, http.MethodGet, "/jobs?limit=200", nil, http.StatusOK, &l)
		return slices.ContainsFunc(l.Jobs, func(j control.JobSummary) bool { return j.ID == id })
	}
	if listed(done) || !listed(kept) {
		t.Errorf("list after the deletion: deleted job listed %v, kept job listed %v", listed(done), listed(kept))
	}
	// The key is free again: a submit with it is a new job.
	var again control.SubmitResult
	e.callJSON(alice, http.MethodPost, "/jobs", spec("done"), http.StatusCreated, &again, "Idempotency-Key", "done-key")
	if again.JobID == done || !again.Created {
		t.Errorf("submit with the deleted job's key: %+v, want a new job", again)
	}

	// A deletion stopped right after its data step, as a crash would stop
	// it: a control plane over the same table and bucket whose hook fails
	// there, attributed to the api function like the route's.
	svc := control.New(control.Config{}, dynamo.New(dynamodb.NewFromConfig(e.cfg), e.r.Resources.Table),
		queue.New(sqs.NewFromConfig(e.cfg)), blob.New(s3.NewFromConfig(e.cfg, awsconf.S3Options(e.cfg)), e.r.Resources.Bucket),
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	errCrash := errors.New("crashed after the data step")
	svc.DeleteStepHook = func(_, step string) error {
		if step == control.DeleteStepData {
			return errCrash
		}
		return nil
	}
	halfRecords := recordsOf(t, e, halfway)
	if _, err := svc.DeleteJob(iamrec.WithFunction(context.Background(), iamrec.FnAPI), alice, halfway); !errors.Is(err, errCrash) {
		t.Fatalf("deletion with a crash after the data step: %v", err)
	}
	if left := keysUnder(t, e, blob.JobPrefix(halfway)); len(left) != 0 {
		t.Errorf("objects left after the data step: %v", left)
	}
	left := recordsOf(t, e, halfway)
	if len(left) != len(halfRecords)-1 { // all but its entry in the owner's list
		t.Errorf("records after the data step: %d, want %d (all but the list entry)", len(left), len(halfRecords)-1)
	}
	// Half deleted, the job is gone to its owner already, and another
	// owner can neither see nor finish it.
	if r := e.call(alice, http.MethodGet, path(halfway), nil); r.Status != http.StatusNotFound {
		t.Errorf("GET of a half-deleted job: %d %s, want 404", r.Status, r.Body)
	}
	if listed(halfway) {
		t.Errorf("a half-deleted job is listed")
	}
	if r := e.call(bob, http.MethodDelete, path(halfway), nil); r.Status != http.StatusNotFound {
		t.Errorf("another owner's DELETE of a half-deleted job: %d %s, want 404", r.Status, r.Body)
	}
	if got := recordsOf(t, e, halfway); !slices.Equal(got, left) {
		t.Errorf("another owner's DELETE changed the records: %v, were %v", got, left)
	}
	// A repeat finishes it.
	var d control.JobDeletion
	e.callJSON(alice, http.MethodDelete, path(halfway), nil, http.StatusOK, &d)
	if !d.Complete || d.Objects != 0 || d.Records != len(left) {
		t.Errorf("finishing deletion %+v, want complete with no object and %d records", d, len(left))
	}
	if left := recordsOf(t, e, halfway); len(left) != 0 {
		t.Errorf("records left after the repeat: %v", left)
	}
	if r := e.call(alice, http.MethodDelete, path(halfway), nil); r.Status != http.StatusNotFound {
		t.Errorf("DELETE after the repeat: %d %s, want 404", r.Status, r.Body)
	}

	// Once the running job is cancelled it can be deleted too.
	var st control.JobStatus
	e.callJSON(alice, http.MethodPost, "/jobs/"+running+"/cancel", nil, http.StatusOK, &st)
	e.callJSON(alice, http.MethodDelete, path(running), nil, http.StatusOK, &d)
	if d.State != string(sm.JobCancelled) || !d.Complete {
		t.Errorf("deleting the cancelled job: %+v", d)
	}
}

// With a retention, a job's end puts it in the sweep index at its end
// plus the retention (the sweep then deletes it), and the records the end
// writes carry a TTL a grace later (DynamoDB deletes them within about 48
// hours of it), as a backstop; without one, neither.
func TestJobEndSetsTTLWithRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	db := dynamodb.NewFromConfig(e.cfg)
	plain, retaining := dynamo.New(db, e.r.Resources.Table), dynamo.New(db, e.r.Resources.Table)
	create := func(name string) string {
		sp, err := spec.Parse([]byte(`{"name":"` + name + `","stages":[{"name":"s","task":"x","partitions":{"count":1}}]}`))
		if err != nil {
			t.Fatal(err)
		}
		id := control.NewJobID()
		if _, _, err := plain.JobCreate(ctx, dynamo.CreateJobParams{Job: domain.Job{ID: id, Owner: "tester", Spec: sp, SpecHash: sp.Hash(), Created: time.Now()},
			IdemKey: name, IdemTTL: time.Hour, StageDue: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	kept, expiring := create("kept"), create("expiring")
	end := time.Now().UTC().Truncate(time.Second)
	const retention = 30 * 24 * time.Hour
	retaining.JobSetRetention(retention)
	if err := plain.JobEnd(ctx, kept, sm.JobCancel, "test", "", end); err != nil {
		t.Fatal(err)
	}
	if err := retaining.JobEnd(ctx, expiring, sm.JobCancel, "test", "", end); err != nil {
		t.Fatal(err)
	}
	ttls := func(id string) map[string]string {
		out := map[string]string{}
		for _, k := range recordsOf(t, e, id) {
			pk, sk := k[:indexOf(k, ' ')], k[indexOf(k, ' ')+1:]
			it, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &e.r.Resources.Table, ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk}}})
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := it.Item[dynamo.Schema.TTL].(*types.AttributeValueMemberN); ok {
				out[k] = v.Value
			}
		}
		return out
	}
	want := strconv.FormatInt(end.Add(retention+dynamo.ExpiryGrace).Unix(), 10)
	// The job item is in the sweep index at the end of its retention,
	// when the sweep deletes the job; the kept job is in none.
	due := func(id string) string {
		it, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &e.r.Resources.Table, ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "JOB#" + id}, "sk": &types.AttributeValueMemberS{Value: "JOB"}}})
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := it.Item[dynamo.Schema.Due].(*types.AttributeValueMemberN); ok {
			return v.Value
		}
		return ""
	}
	if got, want := due(expiring), strconv.FormatInt(end.Add(retention).UnixMilli(), 10); got != want {
		t.Errorf("expiring job due %q, want %s (its end plus the retention)", got, want)
	}
	if got := due(kept); got != "" {
		t.Errorf("kept job due %s, want none", got)
	}
	got := ttls(expiring)
	var withTTL []string
	for k, v := range got {
		if k[:indexOf(k, '#')] == "IDEM" {
			continue // its own ttl, from its creation
		}
		if v != want {
			t.Errorf("%s: ttl %s, want %s (the end plus the retention and the grace)", k, v, want)
		}
		withTTL = append(withTTL, k)
	}
	// The job item, its list entry and its state copies.
	if kinds := kindsOf(withTTL); !slices.Equal(kinds, []string{"JOB JOB", "JST", "OWN"}) || len(withTTL) != 2+dynamo.JobStateShards {
		t.Errorf("records with a ttl: %v, want the job item, its list entry and its %d state copies", withTTL, dynamo.JobStateShards)
	}
	for k, v := range ttls(kept) {
		if !slices.Contains([]string{"IDEM"}, k[:indexOf(k, '#')]) { // the idempotency record's own ttl
			t.Errorf("without a retention, %s has ttl %s", k, v)
		}
	}
}

// A job's records are deleted in calls of a bounded budget: each call
// deletes some and at most about its budget, a later call goes on where it
// stopped, and at the end nothing of the job is left, its idempotency
// record included.
func TestDeleteJobRecordsInBudgets(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	store := dynamo.New(dynamodb.NewFromConfig(e.cfg), e.r.Resources.Table)
	sp, err := spec.Parse([]byte(`{"name":"big","maxConcurrency":2,"stages":[{"name":"s","task":"x","partitions":{"count":250}},{"name":"t","task":"x","after":["s"],"partitions":{"count":1}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	id := control.NewJobID()
	now := time.Now()
	if _, _, err := store.JobCreate(ctx, dynamo.CreateJobParams{Job: domain.Job{ID: id, Owner: "tester", Spec: sp, SpecHash: sp.Hash(), Created: now},
		IdemKey: "big", IdemTTL: time.Hour, StageDue: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	st, err := store.StageSetPlan(ctx, id, 0, 250)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.ShardPut(ctx, id, 0, 250, st.Shards); err != nil {
		t.Fatal(err)
	}
	var tasks []domain.Task
	for p := range 250 {
		tasks = append(tasks, domain.Task{Ref: domain.TaskRef{Job: id, Partition: p}, State: sm.TaskReady, MaxAttempts: 3, Updated: now})
	}
	if err := store.TaskPutMany(ctx, tasks, time.Time{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{7, 150} {
		if _, err := store.AttemptRecordEnd(ctx, dynamo.AttemptEndParams{End: domain.AttemptEnd{
			Ref: domain.TaskRef{Job: id, Partition: p}, Attempt: 1, Kind: domain.AttemptRetried, At: now, Err: "boom"}, Shards: st.Shards}); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.JobEnd(ctx, id, sm.JobCancel, "test", "", now); err != nil {
		t.Fatal(err)
	}
	all := recordsOf(t, e, id)
	if len(all) < 250+4+dynamo.JobStateShards {
		t.Fatalf("%d records, want the tasks, counters, attempt ends, stages and state copies", len(all))
	}
	if err := store.JobMarkDeleting(ctx, id, "tester", time.Now()); err != nil {
		t.Fatal(err)
	}
	const budget = 40
	total, calls := 1, 0 // the list entry, with the mark
	for ; ; calls++ {
		if calls > 30 {
			t.Fatalf("still not done after %d calls", calls)
		}
		n, complete, err := store.JobDeleteRecords(ctx, id, budget)
		if err != nil {
			t.Fatalf("call %d: %v", calls+1, err)
		}
		if n > budget+dynamo.MaxShards+dynamo.JobStateShards || (n == 0 && !complete) {
			t.Fatalf("call %d deleted %d records (budget %d), complete %v", calls+1, n, budget, complete)
		}
		total += n
		if complete {
			break
		}
	}
	n, err := store.JobDeleteItem(ctx, id)
	if err != nil || n != 2 {
		t.Fatalf("DeleteJobItem: %d, %v; want the job item and its idempotency record", n, err)
	}
	total += n
	if calls < len(all)/budget-1 || total != len(all) {
		t.Errorf("%d calls deleted %d records, want about %d calls and all %d", calls+1, total, len(all)/budget, len(all))
	}
	if left := recordsOf(t, e, id); len(left) != 0 {
		t.Errorf("records left: %v", left)
	}
	// Repeats of finished steps are no-ops.
	if n, complete, err := store.JobDeleteRecords(ctx, id, budget); n != 0 || !complete || err != nil {
		t.Errorf("DeleteJobRecords again: %d, %v, %v", n, complete, err)
	}
	if n, err := store.JobDeleteItem(ctx, id); n != 0 || err != nil {
		t.Errorf("DeleteJobItem again: %d, %v", n, err)
	}
}
