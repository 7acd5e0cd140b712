// Package meter counts the AWS requests a process makes, per job, as
// middleware on its AWS SDK clients (Install), and keeps the counts in
// memory until a write already made for the job carries them to the store
// (Take; shared/control/tasks adds them to a commit's count on its stage's
// counter shard). Counting costs no request of its own.
//
// A request is the job's that its context names (WithJob): the executor
// names the job of the task it handles, the control plane the job whose
// stage it starts, completes or repairs. SQS requests that carry several
// messages (a receive, a batch send, delete or visibility change) are
// shared between the messages' jobs, each message an equal share, the job
// of a message read from its body (the jobOf function New is given); a
// delete or visibility change finds its messages' jobs by the receipt
// handles their receive saw. A request no job can be found for (a poll
// that returns nothing, the sweep's scans, an idle executor's beat) is
// shared between the jobs the process made requests for in the last
// ActiveWindow: the overhead of keeping executors and the sweep running
// while those jobs run is theirs. With none, or more than maxActive, it is
// counted as unattributed (Unattributed), no job's.
package meter

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/batchwork/batchwork/shared/awswire"
	"github.com/batchwork/batchwork/shared/cost"
	"github.com/batchwork/batchwork/shared/dynamo/capacity"
)

type jobKey struct{}

// WithJob names the job whose cost ctx's requests are.
func WithJob(ctx context.Context, job string) context.Context {
	if job == "" || JobOf(ctx) == job {
		return ctx
	}
	return context.WithValue(ctx, jobKey{}, job)
}

// JobOf is the job ctx's requests are counted for, "" if none.
func JobOf(ctx context.Context) string {
	j, _ := ctx.Value(jobKey{}).(string)
	return j
}

// maxHandles bounds the receipt handles remembered between a receive and
// its delete: a message that is never deleted (a redelivery, a hand-back)
// would otherwise stay. Past it the map starts again, and the deletes of
// the forgotten handles go unattributed.
const maxHandles = 100_000

// Meter is a process's per-job request counts. A nil *Meter counts
// nothing.
type Meter struct {
	jobOf func(body string) string
	// now is the clock the active jobs are judged by.
	now func() time.Time

	mu           sync.Mutex
	pending      map[string]*cost.Counts
	handles      map[string]string
	unattributed cost.Counts
	// active is when each job last had a request of its own.
	active map[string]time.Time
}

// ActiveWindow is how long after its last request a job shares the
// process's requests that are no job's; maxActive bounds the jobs they
// are shared between (past it they are no job's: a busy process's
// overhead is small beside its jobs' own requests).
const (
	ActiveWindow = 10 * time.Second
	maxActive    = 64
)

// New returns a meter; jobOf reads the job a queue message is for from its
// body ("" when it is no job's).
func New(jobOf func(body string) string) *Meter {
	return &Meter{jobOf: jobOf, now: time.Now, pending: map[string]*cost.Counts{}, handles: map[string]string{}, active: map[string]time.Time{}}
}

// Install adds the counting middleware to cfg, and the meter to the lean
// clients' hooks (hook.go), before clients are made from it.
func (m *Meter) Install(cfg *aws.Config) {
	if m == nil {
		return
	}
	awswire.Install(cfg, m)
	// Clipped: a copy of cfg made before keeps its own options.
	cfg.APIOptions = append(slices.Clip(cfg.APIOptions), func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("batchwork.meter",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				service, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
				if service == "DynamoDB" {
					in.Parameters = capacity.Ask(in.Parameters)
				}
				out, md, err := next.HandleInitialize(ctx, in)
				m.Record(ctx, service, op, in.Parameters, out.Result, err)
				return out, md, err
			}), middleware.After)
	})
}

// Take returns the counts pending for job and forgets them: the caller
// writes them, or gives them back (Put) when its write fails.
func (m *Meter) Take(job string) cost.Counts {
	if m == nil {
		return cost.Counts{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.pending[job]
	delete(m.pending, job)
	if c == nil {
		return cost.Counts{}
	}
	return *c
}

// Put adds counts to job's pending ones: a write's that failed, or
// compute time.
func (m *Meter) Put(job string, c cost.Counts) {
	if m == nil || job == "" || c.IsZero() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.add(job, c, 1)
}

// Pending returns job's pending counts, leaving them pending.
func (m *Meter) Pending(job string) cost.Counts {
	if m == nil {
		return cost.Counts{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.pending[job]; c != nil {
		return *c
	}
	return cost.Counts{}
}

// Unattributed returns the counts of the requests no job could be found
// for, and no active job shared, since the meter was made.
func (m *Meter) Unattributed() cost.Counts {
	if m == nil {
		return cost.Counts{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.unattributed
}

// add adds share of c to job's counts (m.mu held).
func (m *Meter) add(job string, c cost.Counts, share float64) {
	if share != 1 {
		for _, f := range c.Fields() {
			*f.Value *= share
		}
	}
	if job == "" {
		m.share(c)
		return
	}
	m.active[job] = m.now()
	p := m.pending[job]
	if p == nil {
		p = &cost.Counts{}
		m.pending[job] = p
	}
	p.Add(c)
}

// share shares c, no job's, between the active jobs (m.mu held).
func (m *Meter) share(c cost.Counts) {
	since := m.now().Add(-ActiveWindow)
	for j, at := range m.active {
		if at.Before(since) {
			delete(m.active, j)
		}
	}
	if len(m.active) == 0 || len(m.active) > maxActive {
		m.unattributed.Add(c)
		return
	}
	share := 1 / float64(len(m.active))
	for j := range m.active {
		sc := c
		for _, f := range sc.Fields() {
			*f.Value *= share
		}
		p := m.pending[j]
		if p == nil {
			p = &cost.Counts{}
			m.pending[j] = p
		}
		p.Add(sc)
	}
}

// Record counts one request: its service and operation, its input and
// output (nil on error). Install calls it; tests call it directly.
func (m *Meter) Record(ctx context.Context, service, op string, in, out any, err error) {
	if m == nil {
		return
	}
	job := JobOf(ctx)
	var c cost.Counts
	switch service {
	case "DynamoDB":
		if !dataOp(op) {
			return // table management: no job's, and billed otherwise
		}
		c = dynamoCounts(op, in, out, err)
	case "S3":
		switch cost.S3Tier(op) {
		case cost.S3Tier1:
			c.S3Tier1 = 1
		case cost.S3Tier2:
			c.S3Tier2 = 1
		default:
			c.S3Free = 1
		}
	case "Lambda":
		if op == "Invoke" {
			c.LambdaInvokes = 1
		}
	case "EventBridge":
		if v, ok := in.(*eventbridge.PutEventsInput); ok && v != nil {
			c.Events = float64(len(v.Entries))
		}
	case "SQS":
		m.sqs(job, in, out, err)
		return
	default:
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if hs := handlesOf(ctx); job == "" && len(hs) > 0 {
		for _, h := range hs {
			m.add(m.handleJob("", h, false), c, 1/float64(len(hs)))
		}
		return
	}
	m.add(job, c, 1)
}

type handlesKey struct{}

// WithReceipts shares ctx's requests, when it names no job, between the
// jobs of the messages whose receipt handles these are (an executor's
// liveness beat: its cost is the tasks' it holds).
func WithReceipts(ctx context.Context, handles []string) context.Context {
	if len(handles) == 0 {
		return ctx
	}
	return context.WithValue(ctx, handlesKey{}, handles)
}

func handlesOf(ctx context.Context) []string {
	hs, _ := ctx.Value(handlesKey{}).([]string)
	return hs
}

// sqsChunk is SQS's billing unit: each started 64 KB of a request's
// payload is one request.
const sqsChunk = 64 << 10

func chunks(bytes int) float64 { return float64(max(1, (bytes+sqsChunk-1)/sqsChunk)) }

// sqs counts an SQS request, shared between the jobs of its messages.
func (m *Meter) sqs(job string, in, out any, err error) {
	var jobs []string // one per message
	payload := 0
	m.mu.Lock()
	defer m.mu.Unlock()
	switch v := in.(type) {
	case *sqs.SendMessageInput:
		payload = len(aws.ToString(v.MessageBody))
		jobs = append(jobs, m.bodyJob(job, aws.ToString(v.MessageBody)))
	case *sqs.SendMessageBatchInput:
		for _, e := range v.Entries {
			payload += len(aws.ToString(e.MessageBody))
			jobs = append(jobs, m.bodyJob(job, aws.ToString(e.MessageBody)))
		}
	case *sqs.DeleteMessageInput:
		jobs = append(jobs, m.handleJob(job, aws.ToString(v.ReceiptHandle), true))
	case *sqs.DeleteMessageBatchInput:
		for _, e := range v.Entries {
			jobs = append(jobs, m.handleJob(job, aws.ToString(e.ReceiptHandle), err == nil))
		}
	case *sqs.ChangeMessageVisibilityInput:
		jobs = append(jobs, m.handleJob(job, aws.ToString(v.ReceiptHandle), false))
	case *sqs.ChangeMessageVisibilityBatchInput:
		for _, e := range v.Entries {
			jobs = append(jobs, m.handleJob(job, aws.ToString(e.ReceiptHandle), false))
		}
	}
	if o, ok := out.(*sqs.ReceiveMessageOutput); ok && o != nil {
		if len(m.handles) >= maxHandles {
			m.handles = map[string]string{}
		}
		for _, msg := range o.Messages {
			payload += len(aws.ToString(msg.Body))
			j := m.bodyJob(job, aws.ToString(msg.Body))
			jobs = append(jobs, j)
			if j != "" {
				m.handles[aws.ToString(msg.ReceiptHandle)] = j
			}
		}
	}
	c := cost.Counts{SQSRequests: chunks(payload)}
	if len(jobs) == 0 {
		m.add(job, c, 1)
		return
	}
	for _, j := range jobs {
		m.add(j, c, 1/float64(len(jobs)))
	}
}

// bodyJob is the job of a message's body, or the context's.
func (m *Meter) bodyJob(ctxJob, body string) string {
	if m.jobOf != nil {
		if j := m.jobOf(body); j != "" {
			return j
		}
	}
	return ctxJob
}

// handleJob is the job of a received message's handle, or the context's;
// forget drops the handle (its message is deleted).
func (m *Meter) handleJob(ctxJob, handle string, forget bool) string {
	j, ok := m.handles[handle]
	if !ok {
		return ctxJob
	}
	if forget {
		delete(m.handles, handle)
	}
	return j
}

// ---- DynamoDB

// dataOp says whether a DynamoDB operation reads or writes items.
func dataOp(op string) bool {
	switch op {
	case "GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem", "BatchWriteItem",
		"TransactWriteItems", "TransactGetItems", "ExecuteStatement", "BatchExecuteStatement", "ExecuteTransaction":
		return true
	}
	return false
}

// readOp says whether a DynamoDB operation consumes read units.
func readOp(op string) bool {
	switch op {
	case "GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems":
		return true
	}
	return false
}

// dynamoCounts is one DynamoDB request's counts: the units DynamoDB
// reported, and no fewer than its items' minimum (a transaction: two
// units an item, which DynamoDB Local does not report). Where DynamoDB
// reports nothing (a refused write), the minimum is the estimate.
func dynamoCounts(op string, in, out any, err error) cost.Counts {
	c := cost.Counts{DynamoRequests: 1}
	if err != nil && !capacity.Billed(err) {
		return c
	}
	var reported, floor float64
	for _, cc := range capacity.Consumed(out) {
		reported += units(cc)
	}
	items, consistent := itemsOf(in)
	switch {
	case op == "TransactWriteItems" || op == "TransactGetItems":
		floor = 2 * float64(items)
	case readOp(op) && !consistent:
		floor = 0.5 * float64(max(items, 1))
	default:
		floor = float64(max(items, 1))
	}
	units := max(reported, floor)
	if readOp(op) {
		c.DynamoReadUnits = units
	} else {
		c.DynamoWriteUnits = units
	}
	return c
}

// units is what one ConsumedCapacity reports: its total, or, where an
// emulator leaves the indexes out of it (DynamoDB Local), the table's and
// each index's.
func units(cc types.ConsumedCapacity) float64 {
	parts := 0.0
	if cc.Table != nil {
		parts += aws.ToFloat64(cc.Table.CapacityUnits)
	}
	for _, ix := range cc.GlobalSecondaryIndexes {
		parts += aws.ToFloat64(ix.CapacityUnits)
	}
	for _, ix := range cc.LocalSecondaryIndexes {
		parts += aws.ToFloat64(ix.CapacityUnits)
	}
	return max(aws.ToFloat64(cc.CapacityUnits), parts)
}

// itemsOf is the number of items a request names, and whether its reads
// are strongly consistent.
func itemsOf(in any) (items int, consistent bool) {
	switch v := in.(type) {
	case *dynamodb.GetItemInput:
		return 1, aws.ToBool(v.ConsistentRead)
	case *dynamodb.QueryInput:
		return 1, aws.ToBool(v.ConsistentRead)
	case *dynamodb.ScanInput:
		return 1, aws.ToBool(v.ConsistentRead)
	case *dynamodb.BatchGetItemInput:
		for _, ka := range v.RequestItems {
			items += len(ka.Keys)
			consistent = consistent || aws.ToBool(ka.ConsistentRead)
		}
		return items, consistent
	case *dynamodb.BatchWriteItemInput:
		for _, ws := range v.RequestItems {
			items += len(ws)
		}
		return items, true
	case *dynamodb.TransactWriteItemsInput:
		return len(v.TransactItems), true
	case *dynamodb.TransactGetItemsInput:
		return len(v.TransactItems), true
	case *dynamodb.BatchExecuteStatementInput:
		return len(v.Statements), true // the store's INSERTs: a write each
	}
	return 1, true
}
