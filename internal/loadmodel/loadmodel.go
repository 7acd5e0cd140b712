// Package loadmodel records, for each AWS request an aws.Config's clients
// send, where it lands and what it is billed: the DynamoDB partition keys
// it touches with their read and write capacity, the S3 prefix and the SQS
// queue. The bench (cmd/bench) scales the per-key totals to a target task
// rate to find hot keys, and prices the totals (its prices.go).
//
// DynamoDB capacity comes from the service's own answer where it gives
// one: the recorder asks every request for ConsumedCapacity (INDEXES), and
// DynamoDB Local answers with the units it billed. A request that touches
// several items (a transaction, a batch) gets one figure per table, which
// is split over its items in proportion to their sizes by DynamoDB's size
// rules (size.go); items whose size the request does not show (an update)
// are sized from the last time the recorder saw them. Where there is no
// answer (a failed conditional write, an emulator that does not report),
// the units are estimated from those sizes alone. A transaction is billed
// no less than those rules say (two units per KB of each item, and its
// index entries' writes, doubled): DynamoDB Local answers 2 units for any
// TransactWriteItems, however many items it writes.
package loadmodel

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/batchwork/batchwork/shared/awswire"
	"github.com/batchwork/batchwork/shared/cost"
	"github.com/batchwork/batchwork/shared/dynamo/capacity"
)

// Key is one place requests land: a DynamoDB partition (Resource is the
// table, or "table/index" for a global secondary index), an S3 prefix
// (Resource is the bucket) or an SQS queue (Key is empty).
type Key struct {
	Service  string
	Resource string
	Key      string
}

// KeyStat is what landed on one Key.
type KeyStat struct {
	// Requests counts the requests that touched the key (a request that
	// touches it twice counts once).
	Requests int
	// Reads and Writes count item reads and writes on DynamoDB, and on S3
	// the requests in each of S3's per-prefix rate classes: writes are
	// PUT, COPY, POST and DELETE (3,500/s), reads GET, HEAD and LIST
	// (5,500/s).
	Reads, Writes int
	// RCU and WCU are DynamoDB read and write capacity units.
	RCU, WCU float64
}

// OpStat is what one operation ("DynamoDB.UpdateItem") cost.
type OpStat struct {
	Requests int
	// Ops is the operations the requests carried: one a request, but
	// each of a DynamoDB BatchExecuteStatement's statements, which
	// DynamoDB serves (and an emulator spends its CPU on) one by one.
	Ops    int
	Errors int
	// RCU and WCU are the DynamoDB capacity billed (table and indexes).
	RCU, WCU float64
	// Chunks is SQS's billed requests: one per started 64 KB of payload.
	Chunks int
}

// Snapshot is everything recorded since the recorder was made or reset.
type Snapshot struct {
	Ops  map[string]OpStat
	Keys map[Key]KeyStat
	// ReportedRCU and ReportedWCU are the units DynamoDB itself reported
	// (ConsumedCapacity); Estimated counts the DynamoDB requests billed
	// from item sizes alone.
	ReportedRCU, ReportedWCU float64
	Estimated                int
	// Sent counts the messages sent to each queue.
	Sent map[string]int
}

// Table is what the recorder needs to know of a DynamoDB table: its
// partition and sort key attributes and each global secondary index's
// partition key attribute.
type Table struct {
	PK, SK  string
	Indexes map[string]string
}

// Recorder is the recording middleware and its totals. The zero value is
// ready to use; a table it has not been told about (SetTable) is taken to
// have the partition key "pk" and the sort key "sk", and no index.
type Recorder struct {
	// OnSend, if set, is called after each successful SQS send with the
	// queue's name and the number of messages sent.
	OnSend func(queue string, n int, at time.Time)

	mu     sync.Mutex
	tables map[string]Table
	// indexes are each table's indexes in name order, as a slice: the
	// accesses walk them per item without a map iterator.
	indexes map[string][]indexAttr
	// snap holds the totals but Ops and Keys, which are kept in ops and
	// keys: keyed by the operation's two names (no name built per
	// request) and pointing at their stats (one map lookup per touch).
	snap Snapshot
	ops  map[opName]*OpStat
	keys map[Key]*KeyStat
	// as and rep are the accesses' and the reported units' buffers,
	// reused under mu.
	as  []access
	rep []reported
	// What the recorder last saw of each item (by itemID): its size, and
	// its value of each index's partition key, so an update that does not
	// show the item can be sized and its index write placed.
	sizes map[string]int
	gsi   map[string]map[string]string
	// deferred holds DynamoDB requests recorded while Defer is on, whose
	// accounting waits for the next Snapshot or Reset (defer.go).
	deferring bool
	deferred  []dynamoCall
}

// SetTable records a table's key schema.
func (r *Recorder) SetTable(name string, t Table) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tables == nil {
		r.tables, r.indexes = map[string]Table{}, map[string][]indexAttr{}
	}
	r.tables[name] = t
	var idx []indexAttr
	for _, name := range sortedKeys(t.Indexes) {
		idx = append(idx, indexAttr{name, t.Indexes[name]})
	}
	r.indexes[name] = idx
}

// indexAttr is a global secondary index and its partition key attribute.
type indexAttr struct{ name, attr string }

// DescribeTable reads a table's key schema with db (use a client whose
// requests are not recorded) and records it.
func (r *Recorder) DescribeTable(ctx context.Context, db *dynamodb.Client, name string) error {
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &name})
	if err != nil {
		return fmt.Errorf("describe table %s: %w", name, err)
	}
	t := Table{Indexes: map[string]string{}}
	for _, k := range out.Table.KeySchema {
		if k.KeyType == types.KeyTypeHash {
			t.PK = aws.ToString(k.AttributeName)
		} else {
			t.SK = aws.ToString(k.AttributeName)
		}
	}
	for _, g := range out.Table.GlobalSecondaryIndexes {
		for _, k := range g.KeySchema {
			if k.KeyType == types.KeyTypeHash {
				t.Indexes[aws.ToString(g.IndexName)] = aws.ToString(k.AttributeName)
			}
		}
	}
	r.SetTable(name, t)
	return nil
}

// Install adds the recording middleware to cfg (before clients are made
// from it).
func (r *Recorder) Install(cfg *aws.Config) {
	awswire.Install(cfg, r) // hook.go
	cfg.APIOptions = append(cfg.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("batchwork.loadmodel",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				service, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
				if service == "DynamoDB" {
					in.Parameters = capacity.Ask(in.Parameters)
				}
				out, md, err := next.HandleInitialize(ctx, in)
				r.Record(service, op, in.Parameters, out.Result, err)
				return out, md, err
			}), middleware.After)
	})
}

// Reset forgets the totals (not the tables, nor what it saw of items).
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.account() // what it saw of items
	r.snap = Snapshot{}
	r.ops, r.keys = nil, nil
}

// opName is an operation's service and name.
type opName struct{ service, op string }

// Snapshot returns a copy of the totals.
func (r *Recorder) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.account()
	s := Snapshot{Ops: map[string]OpStat{}, Keys: map[Key]KeyStat{}, Sent: map[string]int{},
		ReportedRCU: r.snap.ReportedRCU, ReportedWCU: r.snap.ReportedWCU, Estimated: r.snap.Estimated}
	for k, v := range r.ops {
		s.Ops[k.service+"."+k.op] = *v
	}
	for k, v := range r.keys {
		s.Keys[k] = *v
	}
	for k, v := range r.snap.Sent {
		s.Sent[k] = v
	}
	return s
}

// Record records one request: its service and operation, its input, and
// its output (nil on error). Install calls it; tests call it directly.
func (r *Recorder) Record(service, op string, in, out any, err error) {
	r.mu.Lock()
	if service == "DynamoDB" {
		if r.deferring && len(r.deferred) < maxDeferred {
			r.deferred = append(r.deferred, dynamoCall{op, in, out, err})
			r.mu.Unlock()
			return
		}
		r.account() // first the requests before it: what it saw of items
	}
	sentQueue, sent := r.record(service, op, in, out, err)
	r.mu.Unlock()
	if sent > 0 && r.OnSend != nil {
		r.OnSend(sentQueue, sent, time.Now())
	}
}

// record accounts for one request, under mu; an SQS send returns its
// queue and how many messages it sent.
func (r *Recorder) record(service, op string, in, out any, err error) (sentQueue string, sent int) {
	if r.ops == nil {
		r.ops, r.keys = map[opName]*OpStat{}, map[Key]*KeyStat{}
	}
	if r.snap.Sent == nil {
		r.snap.Sent = map[string]int{}
	}
	name := opName{service, op}
	st := r.ops[name]
	if st == nil {
		st = &OpStat{}
		r.ops[name] = st
	}
	st.Requests++
	if b, ok := in.(*dynamodb.BatchExecuteStatementInput); ok {
		st.Ops += len(b.Statements)
	} else {
		st.Ops++
	}
	if err != nil {
		st.Errors++
	}
	switch service {
	case "DynamoDB":
		rcu, wcu := r.dynamo(in, out, err)
		st.RCU += rcu
		st.WCU += wcu
	case "S3":
		r.s3(op, in)
	case "SQS":
		sentQueue, sent, st.Chunks = r.sqs(op, in, out, err, st.Chunks)
	}
	return sentQueue, sent
}

// keySet is the keys one request touched: a few, so an array (and a
// slice past four), not a map made per request.
type keySet struct {
	n      int
	inline [4]Key
	more   []Key
}

// add says whether k is new to the set, and adds it.
func (s *keySet) add(k Key) bool {
	if slices.Contains(s.inline[:s.n], k) || slices.Contains(s.more, k) {
		return false
	}
	if s.n < len(s.inline) {
		s.inline[s.n] = k
		s.n++
	} else {
		s.more = append(s.more, k)
	}
	return true
}

// touch adds one request's use of k.
func (r *Recorder) touch(k Key, reads, writes int, rcu, wcu float64, seen *keySet) {
	ks := r.keys[k]
	if ks == nil {
		ks = &KeyStat{}
		r.keys[k] = ks
	}
	if seen.add(k) {
		ks.Requests++
	}
	ks.Reads += reads
	ks.Writes += writes
	ks.RCU += rcu
	ks.WCU += wcu
}

// ---- S3

// S3Prefix is the part of an object key S3's request-rate limits apply
// to here: the key up to and including its last '/' (S3 partitions by
// prefix; this is the finest prefix a key's layout suggests).
func S3Prefix(key string) string {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[:i+1]
	}
	return ""
}

// s3Writes says whether an operation counts toward S3's per-prefix write
// rate (PUT, COPY, POST, DELETE) rather than its read rate (GET, HEAD,
// LIST).
func s3Writes(op string) bool {
	for _, p := range []string{"Put", "Copy", "Delete", "Create", "UploadPart", "Complete", "Abort", "Restore"} {
		if strings.HasPrefix(op, p) {
			return true
		}
	}
	return false
}

func (r *Recorder) s3(op string, in any) {
	bucket, key := stringField(in, "Bucket"), stringField(in, "Key")
	prefix := S3Prefix(key)
	if key == "" {
		prefix = S3Prefix(stringField(in, "Prefix"))
	}
	if bucket == "" {
		return
	}
	reads, writes := 1, 0
	if s3Writes(op) {
		reads, writes = 0, 1
	}
	r.touch(Key{"S3", bucket, prefix}, reads, writes, 0, 0, &keySet{})
}

// stringField is the *string field name of the struct in points at, "" if
// none.
func stringField(in any, name string) string {
	v := reflect.ValueOf(in)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return ""
	}
	f := v.Elem().FieldByName(name)
	if !f.IsValid() || f.Kind() != reflect.Pointer || f.IsNil() || f.Elem().Kind() != reflect.String {
		return ""
	}
	return f.Elem().String()
}

// ---- SQS

// sqsChunk is SQS's billing unit: each started 64 KB of a request's
// payload is billed as one request.
const sqsChunk = 64 << 10

func chunks(bytes int) int { return max(1, (bytes+sqsChunk-1)/sqsChunk) }

func (r *Recorder) sqs(op string, in, out any, err error, chunksSoFar int) (queue string, sent, total int) {
	url := stringField(in, "QueueUrl")
	queue = url[strings.LastIndexByte(url, '/')+1:]
	payload := 0
	switch v := in.(type) {
	case *sqs.SendMessageInput:
		payload = len(aws.ToString(v.MessageBody))
		if err == nil {
			sent = 1
		}
	case *sqs.SendMessageBatchInput:
		for _, e := range v.Entries {
			payload += len(aws.ToString(e.MessageBody))
		}
		if o, ok := out.(*sqs.SendMessageBatchOutput); ok && o != nil {
			sent = len(o.Successful)
		}
	}
	if o, ok := out.(*sqs.ReceiveMessageOutput); ok && o != nil {
		for _, m := range o.Messages {
			payload += len(aws.ToString(m.Body))
		}
	}
	if queue != "" {
		r.touch(Key{"SQS", queue, ""}, 0, 0, 0, 0, &keySet{})
	}
	if sent > 0 {
		r.snap.Sent[queue] += sent
	}
	return queue, sent, chunksSoFar + chunks(payload)
}

// ---- DynamoDB

// access is one item (or, for a Query or Scan, one partition) a request
// reads or writes.
type access struct {
	table, index string // index: a Query on a global secondary index
	pk, id       string // partition key value; item identity (table, pk, sk)
	write, check bool   // check: a transaction's ConditionCheck (billed as a transactional read)
	consistent   bool
	tx           bool
	// floor: billed no less than AWS's rules for its item (a PartiQL
	// statement, whose capacity DynamoDB Local need not report).
	floor bool
	// refused: a batch's statement that changed nothing (its answer's
	// error): billed, but no index entry written, and not remembered.
	refused bool
	size    int
	units   float64
	// newGSI holds, for each index whose partition key this write sets,
	// the new value; removed lists those it removes; deleted, that the
	// item is gone.
	newGSI  gsiKeys
	removed []string
	deleted bool
}

// gsiKeys are index partition key values by index: a write sets one or
// two, so a slice, not a map made per access.
type gsiKeys []gsiKey

type gsiKey struct{ idx, key string }

func (g gsiKeys) get(idx string) (string, bool) {
	for _, k := range g {
		if k.idx == idx {
			return k.key, true
		}
	}
	return "", false
}

func (r *Recorder) table(name string) Table {
	if t, ok := r.tables[name]; ok {
		return t
	}
	return Table{PK: "pk", SK: "sk"}
}

func attrString(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return v.Value
	case *types.AttributeValueMemberB:
		return fmt.Sprintf("%x", v.Value)
	}
	return ""
}

// keyOf is an item's partition key value and identity.
func (r *Recorder) keyOf(table string, item map[string]types.AttributeValue) (pk, id string) {
	t := r.table(table)
	pk = attrString(item[t.PK])
	return pk, table + "\x00" + pk + "\x00" + attrString(item[t.SK])
}

// itemAccess is a read or write of one item given by its key (or, for a
// put, the whole item).
func (r *Recorder) itemAccess(table string, key map[string]types.AttributeValue) access {
	pk, id := r.keyOf(table, key)
	return access{table: table, pk: pk, id: id, size: r.sizes[id]}
}

// putAccess is a write of a whole item.
func (r *Recorder) putAccess(table string, item map[string]types.AttributeValue) access {
	a := r.itemAccess(table, item)
	a.write = true
	a.size = max(ItemSize(item), r.sizes[a.id]) // billed on the larger of the old and new item
	for _, ix := range r.indexes[table] {
		if v, ok := item[ix.attr]; ok {
			a.newGSI = append(a.newGSI, gsiKey{ix.name, attrString(v)})
		} else {
			a.removed = append(a.removed, ix.name)
		}
	}
	return a
}

// updateAccess is an UpdateItem (or a transaction's Update) of one item.
func (r *Recorder) updateAccess(table string, key map[string]types.AttributeValue, expr *string,
	names map[string]string, values map[string]types.AttributeValue) access {
	a := r.itemAccess(table, key)
	a.write = true
	p := parseUpdateOnce(aws.ToString(expr), names)
	grow := 0
	for _, as := range p.assigns {
		if v, ok := values[as.ph]; ok {
			grow += len(as.attr) + valueSize(v)
		}
	}
	// An item the recorder has not seen is sized from what the update
	// writes (a lower bound).
	if a.size == 0 {
		a.size = ItemSize(key) + grow
	}
	for _, ix := range r.indexes[table] {
		if ph, ok := p.set[ix.attr]; ok {
			a.newGSI = append(a.newGSI, gsiKey{ix.name, attrString(values[ph])})
		}
		for _, rm := range p.removed {
			if rm == ix.attr {
				a.removed = append(a.removed, ix.name)
			}
		}
	}
	return a
}

// statementUpdateAccess is a PartiQL UPDATE of one item (ParseUpdateStatement).
func (r *Recorder) statementUpdateAccess(table string, key, set map[string]types.AttributeValue, removed []string) access {
	a := r.itemAccess(table, key)
	a.write = true
	if a.size == 0 {
		a.size = ItemSize(key)
		for attr, v := range set {
			a.size += len(attr) + valueSize(v)
		}
	}
	for _, ix := range r.indexes[table] {
		if v, ok := set[ix.attr]; ok {
			a.newGSI = append(a.newGSI, gsiKey{ix.name, attrString(v)})
		}
		if slices.Contains(removed, ix.attr) {
			a.removed = append(a.removed, ix.name)
		}
	}
	return a
}

func (r *Recorder) deleteAccess(table string, key map[string]types.AttributeValue) access {
	a := r.itemAccess(table, key)
	a.write, a.deleted = true, true
	for _, ix := range r.indexes[table] {
		a.removed = append(a.removed, ix.name)
	}
	return a
}

func sizeOf(items ...map[string]types.AttributeValue) int {
	n := 0
	for _, it := range items {
		n += ItemSize(it)
	}
	return n
}

// readSizes maps returned items to their identity and size.
func (r *Recorder) readSizes(table string, items []map[string]types.AttributeValue) map[string]int {
	m := map[string]int{}
	for _, it := range items {
		_, id := r.keyOf(table, it)
		m[id] = ItemSize(it)
	}
	return m
}

// accesses lists what a DynamoDB request reads and writes, with the
// items' sizes as far as the request and its answer show them, appended
// to buf[:0].
func (r *Recorder) accesses(buf []access, in, out any) (as []access, read bool) {
	as = buf[:0]
	switch v := in.(type) {
	case *dynamodb.GetItemInput:
		a := r.itemAccess(aws.ToString(v.TableName), v.Key)
		a.consistent = aws.ToBool(v.ConsistentRead)
		if o, ok := out.(*dynamodb.GetItemOutput); ok && o != nil && o.Item != nil {
			a.size = ItemSize(o.Item)
		}
		return append(as, a), true
	case *dynamodb.PutItemInput:
		return append(as, r.putAccess(aws.ToString(v.TableName), v.Item)), false
	case *dynamodb.UpdateItemInput:
		return append(as, r.updateAccess(aws.ToString(v.TableName), v.Key, v.UpdateExpression, v.ExpressionAttributeNames, v.ExpressionAttributeValues)), false
	case *dynamodb.DeleteItemInput:
		return append(as, r.deleteAccess(aws.ToString(v.TableName), v.Key)), false
	case *dynamodb.QueryInput:
		table := aws.ToString(v.TableName)
		a := access{table: table, index: aws.ToString(v.IndexName), consistent: aws.ToBool(v.ConsistentRead)}
		t := r.table(table)
		attr := t.PK
		if a.index != "" {
			attr = t.Indexes[a.index]
		}
		a.pk = QueryPartition(aws.ToString(v.KeyConditionExpression), attr, v.ExpressionAttributeNames, v.ExpressionAttributeValues)
		if o, ok := out.(*dynamodb.QueryOutput); ok && o != nil {
			a.size = sizeOf(o.Items...)
		}
		return append(as, a), true
	case *dynamodb.ScanInput:
		a := access{table: aws.ToString(v.TableName), index: aws.ToString(v.IndexName), pk: "(scan)", consistent: aws.ToBool(v.ConsistentRead)}
		if o, ok := out.(*dynamodb.ScanOutput); ok && o != nil {
			a.size = sizeOf(o.Items...)
		}
		return append(as, a), true
	case *dynamodb.BatchGetItemInput:
		var resp map[string][]map[string]types.AttributeValue
		if o, ok := out.(*dynamodb.BatchGetItemOutput); ok && o != nil {
			resp = o.Responses
		}
		for _, table := range sortedKeys(v.RequestItems) {
			ka := v.RequestItems[table]
			got := r.readSizes(table, resp[table])
			for _, k := range ka.Keys {
				a := r.itemAccess(table, k)
				a.consistent = aws.ToBool(ka.ConsistentRead)
				if n, ok := got[a.id]; ok {
					a.size = n
				}
				as = append(as, a)
			}
		}
		return as, true
	case *dynamodb.BatchWriteItemInput:
		for _, table := range sortedKeys(v.RequestItems) {
			for _, w := range v.RequestItems[table] {
				switch {
				case w.PutRequest != nil:
					as = append(as, r.putAccess(table, w.PutRequest.Item))
				case w.DeleteRequest != nil:
					as = append(as, r.deleteAccess(table, w.DeleteRequest.Key))
				}
			}
		}
		return as, false
	case *dynamodb.BatchExecuteStatementInput:
		// Writes only (the store's INSERTs and UPDATEs); each is a
		// conditional write, billed by its item's size whether or not its
		// condition holds.
		for _, st := range v.Statements {
			stmt := aws.ToString(st.Statement)
			if table, set, where, removed, ok := ParseUpdateStatement(stmt, st.Parameters); ok {
				t := r.table(table)
				if pk, sk := where[t.PK], where[t.SK]; pk != nil && (sk != nil || t.SK == "") {
					key := map[string]types.AttributeValue{t.PK: pk}
					if sk != nil {
						key[t.SK] = sk
					}
					a := r.statementUpdateAccess(table, key, set, removed)
					a.floor = true
					as = append(as, a)
					continue
				}
			}
			table, item, ok := ParseInsert(stmt, st.Parameters)
			if !ok {
				as = append(as, access{table: table, pk: "(partiql)", write: true, floor: true, units: 1})
				continue
			}
			a := r.putAccess(table, item)
			a.floor = true
			as = append(as, a)
		}
		// A refused statement (a DuplicateItem INSERT, a condition that
		// did not hold) is billed its write but changed nothing.
		if o, ok := out.(*dynamodb.BatchExecuteStatementOutput); ok && o != nil {
			for i, resp := range o.Responses {
				if i < len(as) && resp.Error != nil {
					as[i].refused = true
				}
			}
		}
		return as, false
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range v.TransactItems {
			var a access
			switch {
			case it.Put != nil:
				a = r.putAccess(aws.ToString(it.Put.TableName), it.Put.Item)
			case it.Update != nil:
				u := it.Update
				a = r.updateAccess(aws.ToString(u.TableName), u.Key, u.UpdateExpression, u.ExpressionAttributeNames, u.ExpressionAttributeValues)
			case it.Delete != nil:
				a = r.deleteAccess(aws.ToString(it.Delete.TableName), it.Delete.Key)
			case it.ConditionCheck != nil:
				a = r.itemAccess(aws.ToString(it.ConditionCheck.TableName), it.ConditionCheck.Key)
				a.check, a.consistent = true, true
			default:
				continue
			}
			a.tx = true
			as = append(as, a)
		}
		return as, false
	case *dynamodb.TransactGetItemsInput:
		var resp []types.ItemResponse
		if o, ok := out.(*dynamodb.TransactGetItemsOutput); ok && o != nil {
			resp = o.Responses
		}
		for i, it := range v.TransactItems {
			if it.Get == nil {
				continue
			}
			a := r.itemAccess(aws.ToString(it.Get.TableName), it.Get.Key)
			a.tx, a.consistent = true, true
			if i < len(resp) && resp[i].Item != nil {
				a.size = ItemSize(resp[i].Item)
			}
			as = append(as, a)
		}
		return as, true
	}
	return as, true
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// estimate is the units an access is billed by the size rules.
func (a access) estimate() float64 {
	switch {
	case a.write:
		return WriteUnits(a.size, a.tx)
	default:
		return ReadUnits(a.size, a.consistent, a.tx)
	}
}

// reported is the capacity DynamoDB reported for one table: the table's
// own read and write units, and each index's units in index name order.
type reported struct {
	table       string
	read, write float64
	indexes     []indexUnits
}

type indexUnits struct {
	name  string
	units float64
}

// index is the units reported for index name, 0 if none.
func (t *reported) index(name string) float64 {
	for _, u := range t.indexes {
		if u.name == name {
			return u.units
		}
	}
	return 0
}

// setIndex sets index name's units, keeping the name order.
func (t *reported) setIndex(name string, units float64) {
	for i, u := range t.indexes {
		if u.name == name {
			t.indexes[i].units = units
			return
		}
	}
	t.indexes = append(t.indexes, indexUnits{name, units})
	slices.SortFunc(t.indexes, func(a, b indexUnits) int { return strings.Compare(a.name, b.name) })
}

// parseConsumed splits a request's ConsumedCapacity by table into table
// and index units, appended to buf[:0] (a table given twice keeps its
// last figure). A figure given only as CapacityUnits is the request's
// class (read for a read request, write for a write).
func parseConsumed(buf []reported, ccs []types.ConsumedCapacity, read bool) []reported {
	rep := buf[:0]
	for _, cc := range ccs {
		name := aws.ToString(cc.TableName)
		i := slices.IndexFunc(rep, func(t reported) bool { return t.table == name })
		if i < 0 {
			if len(rep) < cap(rep) {
				rep = rep[:len(rep)+1] // its indexes' array is reused
			} else {
				rep = append(rep, reported{})
			}
			i = len(rep) - 1
		}
		rep[i] = reported{table: name, indexes: rep[i].indexes[:0]}
		t := &rep[i]
		gsiTotal := 0.0
		for name, c := range cc.GlobalSecondaryIndexes {
			u := aws.ToFloat64(c.CapacityUnits)
			if u == 0 {
				u = aws.ToFloat64(c.ReadCapacityUnits) + aws.ToFloat64(c.WriteCapacityUnits)
			}
			t.indexes = append(t.indexes, indexUnits{name, u})
			gsiTotal += u
		}
		slices.SortFunc(t.indexes, func(a, b indexUnits) int { return strings.Compare(a.name, b.name) })
		var c types.Capacity
		if cc.Table != nil {
			c = *cc.Table
		} else {
			c = types.Capacity{CapacityUnits: aws.Float64(aws.ToFloat64(cc.CapacityUnits) - gsiTotal),
				ReadCapacityUnits: cc.ReadCapacityUnits, WriteCapacityUnits: cc.WriteCapacityUnits}
		}
		t.read, t.write = aws.ToFloat64(c.ReadCapacityUnits), aws.ToFloat64(c.WriteCapacityUnits)
		if t.read == 0 && t.write == 0 {
			if read {
				t.read = aws.ToFloat64(c.CapacityUnits)
			} else {
				t.write = aws.ToFloat64(c.CapacityUnits)
			}
		}
	}
	return rep
}

// dynamo records a DynamoDB request and returns its billed units.
func (r *Recorder) dynamo(in, out any, err error) (rcu, wcu float64) {
	as, read := r.accesses(r.as, in, out)
	defer func() {
		clear(as) // the buffer keeps no request's maps
		r.as = as[:0]
	}()
	var seen keySet
	if err != nil && !capacity.Billed(err) {
		for _, a := range as {
			r.touch(Key{"DynamoDB", resource(a.table, a.index), a.pk}, 0, 0, 0, 0, &seen)
		}
		return 0, 0
	}
	for i := range as {
		as[i].units = as[i].estimate()
	}
	rep := parseConsumed(r.rep, capacity.Consumed(out), read)
	r.rep = rep
	if len(rep) == 0 {
		r.snap.Estimated++
	}
	tx, floor := false, false
	for _, a := range as {
		tx = tx || a.tx
		floor = floor || a.tx || a.floor
	}
	// Scale each table's estimates to the figure DynamoDB reported, per
	// class (a transaction's condition checks are reads). A transaction
	// is billed no less than its estimate, AWS's documented rule (two
	// units per KB of each item): DynamoDB Local reports a
	// TransactWriteItems as 2 units whatever its number of items (and 2
	// for each index it touches), which would bill a 100-task
	// materialization as one task.
	for _, t := range rep {
		r.snap.ReportedRCU += t.read
		r.snap.ReportedWCU += t.write
		for _, class := range [2]bool{true, false} { // reads, writes
			want := t.read
			if !class {
				want = t.write
			}
			est := 0.0
			for _, a := range as {
				if a.table == t.table && a.write != class {
					est += a.units
				}
			}
			if floor {
				want = max(want, est)
			}
			if want == 0 {
				continue
			}
			for i, a := range as {
				if a.table == t.table && a.write != class && est > 0 {
					as[i].units = a.units * want / est
				}
			}
		}
	}
	for _, a := range as {
		k := Key{"DynamoDB", resource(a.table, a.index), a.pk}
		if a.write {
			r.touch(k, 0, 1, 0, a.units, &seen)
			wcu += a.units
		} else {
			r.touch(k, 1, 0, a.units, 0, &seen)
			rcu += a.units
		}
	}
	if len(rep) == 0 && floor && !tx {
		wcu += r.statementIndexUnits(as, &seen)
	}
	// Index units: each index's writes go to the partitions of the items'
	// index keys (new or old); with no key known, to "(unknown)".
	for ti := range rep {
		t := &rep[ti]
		if tx {
			// Floored as the table's units are, by the index entries
			// the transaction writes.
			for _, ix := range r.indexes[t.table] {
				if est, got := r.indexEstimate(as, t.table, ix.name), t.index(ix.name); est > got {
					r.snap.ReportedWCU -= est - got // added back below: reported is what DynamoDB said
					t.setIndex(ix.name, est)
				}
			}
		}
		for _, iu := range t.indexes {
			idx, u := iu.name, iu.units
			if u == 0 {
				continue
			}
			r.snap.ReportedWCU += u
			var keysBuf [4]string
			keys := keysBuf[:0]
			for _, a := range as {
				if a.table != t.table || !a.write {
					continue
				}
				if v, ok := a.newGSI.get(idx); ok {
					keys = append(keys, v)
				} else if old, ok := r.gsi[a.id][idx]; ok {
					keys = append(keys, old)
				}
			}
			if len(keys) == 0 {
				keys = append(keys, "(unknown)")
			}
			for _, gk := range keys {
				r.touch(Key{"DynamoDB", resource(t.table, idx), gk}, 0, 1, 0, u/float64(len(keys)), &seen)
			}
			wcu += u
		}
	}
	if err == nil {
		r.remember(as)
	}
	return rcu, wcu
}

// statementIndexUnits charges the index entries a request's PartiQL
// writes put, move or remove, which DynamoDB Local does not report for a
// BatchExecuteStatement and AWS bills as it does an UpdateItem's: an
// entry put or removed one write, an entry moved (its key changed) a
// delete at its old key and a put at its new one. Whether an item had an
// entry is what the recorder last saw of it.
func (r *Recorder) statementIndexUnits(as []access, seen *keySet) (wcu float64) {
	for _, a := range as {
		if !a.write || a.id == "" || a.refused {
			continue
		}
		for _, ix := range r.indexes[a.table] {
			old, had := r.gsi[a.id][ix.name]
			nk, sets := a.newGSI.get(ix.name)
			var keys []string
			switch {
			case sets && had && old != nk:
				keys = []string{old, nk}
			case sets && !had:
				keys = []string{nk}
			case had && (a.deleted || slices.Contains(a.removed, ix.name)):
				keys = []string{old}
			}
			for _, k := range keys {
				r.touch(Key{"DynamoDB", resource(a.table, ix.name), k}, 0, 1, 0, 1, seen)
				wcu++
			}
		}
	}
	return wcu
}

// indexEstimate is the write units a transaction's writes cost on index
// idx by AWS's rules: an entry put or removed is one write, an entry
// moved (its key changed) a delete and a put, each doubled as
// transactional. Whether an item had an entry is what the recorder last
// saw of it.
func (r *Recorder) indexEstimate(as []access, table, idx string) float64 {
	n := 0.0
	for _, a := range as {
		if a.table != table || !a.write {
			continue
		}
		_, had := r.gsi[a.id][idx]
		_, sets := a.newGSI.get(idx)
		switch {
		case sets && had:
			n += 2
		case sets:
			n++
		case had && (a.deleted || slices.Contains(a.removed, idx)):
			n++
		}
	}
	return 2 * n
}

// remember keeps what a successful request showed of its items.
func (r *Recorder) remember(as []access) {
	if r.sizes == nil {
		r.sizes, r.gsi = map[string]int{}, map[string]map[string]string{}
	}
	for _, a := range as {
		if a.id == "" || a.check || a.refused {
			continue
		}
		if a.deleted {
			delete(r.sizes, a.id)
			delete(r.gsi, a.id)
			continue
		}
		if a.size > 0 {
			r.sizes[a.id] = a.size
		}
		if !a.write {
			continue
		}
		g := r.gsi[a.id]
		if g == nil && len(a.newGSI) > 0 {
			g = map[string]string{}
			r.gsi[a.id] = g
		}
		for _, k := range a.newGSI {
			g[k.idx] = k.key
		}
		for _, idx := range a.removed {
			delete(g, idx)
		}
	}
}

func resource(table, index string) string {
	if index == "" {
		return table
	}
	return table + "/" + index
}

// ---- Reading the results

// Scaled is a rate at a target task rate: total/tasks*rate.
func Scaled(total float64, tasks int, rate float64) float64 {
	if tasks == 0 {
		return 0
	}
	return total / float64(tasks) * rate
}

// Hottest returns up to n keys of service, highest by(stat) first.
func (s Snapshot) Hottest(service string, n int, by func(KeyStat) float64) []Key {
	var ks []Key
	for k, v := range s.Keys {
		if k.Service == service && by(v) > 0 {
			ks = append(ks, k)
		}
	}
	sort.Slice(ks, func(i, j int) bool {
		a, b := by(s.Keys[ks[i]]), by(s.Keys[ks[j]])
		if a != b {
			return a > b
		}
		return ks[i].Resource+ks[i].Key < ks[j].Resource+ks[j].Key
	})
	return ks[:min(n, len(ks))]
}

// Totals sums the snapshot by service: requests, and for DynamoDB its
// units, for S3 its requests per price tier (indexed by cost.S3Tier), for
// SQS its billed chunks.
type Totals struct {
	Requests map[string]int
	// Ops is each service's operations (OpStat.Ops).
	Ops      map[string]int
	RCU, WCU float64
	S3       [3]int
	Chunks   int
}

// Totals sums the snapshot.
func (s Snapshot) Totals() Totals {
	t := Totals{Requests: map[string]int{}, Ops: map[string]int{}}
	for name, op := range s.Ops {
		service, opName, _ := strings.Cut(name, ".")
		t.Requests[service] += op.Requests
		t.Ops[service] += op.Ops
		t.RCU += op.RCU
		t.WCU += op.WCU
		switch service {
		case "S3":
			t.S3[cost.S3Tier(opName)] += op.Requests
		case "SQS":
			t.Chunks += op.Chunks
		}
	}
	return t
}

// KindOf is a partition key's kind: the text before its first '#' (the
// layout's record type: JOB, TASK, CNT, ...), or the key itself.
func KindOf(key string) string {
	if i := strings.IndexByte(key, '#'); i > 0 {
		return key[:i]
	}
	return key
}

// Round1 rounds for printing.
func Round1(f float64) float64 { return math.Round(f*10) / 10 }
