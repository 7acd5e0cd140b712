// Package iamrec records which IAM actions each deployed function's code
// path performs, so tests can prove the synthesized roles against the code
// (the emulator enforces no IAM, so a missing grant would otherwise pass
// every test and fail only on AWS).
//
// A request is attributed to the function named by its context
// (WithFunction): the local runner tags the contexts it runs each handler
// on the way the deployed function would run it. Untagged requests (test
// setup, provisioning, assertions) are not recorded.
//
// Each SDK operation maps to the IAM actions AWS authorizes it with, which
// are not always the operation's own name: batch APIs are authorized by
// their single-message action (SendMessageBatch needs sqs:SendMessage),
// HeadObject by s3:GetObject (s3:GetObjectVersion when it names a
// version, as GetObject then), ListObjectsV2 by s3:ListBucket,
// ListObjectVersions by s3:ListBucketVersions, and a
// DynamoDB transaction by the per-item action of each of its parts
// (a ConditionCheck part needs dynamodb:ConditionCheckItem), with nothing
// for TransactWriteItems itself.
package iamrec

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
	"github.com/batchwork/batchwork/shared/awswire"
)

// The deployed functions (functions/<name>, infra/batchwork's Fn*).
const (
	FnAPI      = "api"
	FnClaim    = "claim"
	FnCommit   = "commit"
	FnSweep    = "sweep"
	FnExecutor = "executor"
)

// Functions lists every deployed function.
var Functions = []string{FnAPI, FnClaim, FnCommit, FnSweep, FnExecutor}

type functionKey struct{}

// WithFunction returns ctx attributing the AWS requests made with it to
// the deployed function fn.
func WithFunction(ctx context.Context, fn string) context.Context {
	return context.WithValue(ctx, functionKey{}, fn)
}

// FunctionOf returns the function ctx is attributed to, or "".
func FunctionOf(ctx context.Context) string {
	fn, _ := ctx.Value(functionKey{}).(string)
	return fn
}

// Resource kinds: what an action is performed on, as the request names it.
const (
	KindTable  = "table"  // Name: table name
	KindIndex  = "index"  // Name: table name, Index: index name
	KindBucket = "bucket" // Name: bucket name (the bucket itself)
	KindObject = "object" // Name: bucket name (an object in it)
	KindQueue  = "queue"  // Name: queue URL (or queue name for GetQueueUrl)
	KindOther  = "other"  // an operation this package does not map
)

// Resource is the resource a request acts on.
type Resource struct {
	Kind, Name, Index string
	// Key is the object's key (KindObject), so that grants on key
	// patterns (jobs/*) can be checked against the objects used; for a
	// listing (KindBucket), the prefix listed, which a grant's s3:prefix
	// condition is checked against.
	Key string
}

func (r Resource) String() string {
	switch {
	case r.Index != "":
		return r.Kind + ":" + r.Name + "/index/" + r.Index
	case r.Kind == KindObject:
		return r.Kind + ":" + r.Name + "/" + r.Key
	case r.Kind == KindBucket && r.Key != "":
		return r.Kind + ":" + r.Name + "?prefix=" + r.Key
	}
	return r.Kind + ":" + r.Name
}

// Action is one IAM action on one resource.
type Action struct {
	Action   string
	Resource Resource
}

// Use is an action a function performed.
type Use struct {
	Function string
	Action
}

// Recorder counts the actions each function performs. The zero value is
// not usable; call New.
type Recorder struct {
	mu   sync.Mutex
	uses map[Use]int
}

// New returns an empty recorder.
func New() *Recorder { return &Recorder{uses: map[Use]int{}} }

const middlewareID = "batchwork.iamrec"

// Install adds the recorder to cfg's API options, so clients made from cfg
// afterwards record through it. Installing twice is harmless.
func (r *Recorder) Install(cfg *aws.Config) {
	awswire.Install(cfg, r) // hook.go
	cfg.APIOptions = append(cfg.APIOptions, func(st *middleware.Stack) error {
		if _, ok := st.Initialize.Get(middlewareID); ok {
			return nil
		}
		// The Initialize step runs once per operation call (retries are
		// below it) and is the only step that sees the typed input. A
		// presigned request passes through it too: the URL is authorized
		// by the signer's role, so it counts as the signer's action.
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc(middlewareID,
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if fn := FunctionOf(ctx); fn != "" {
					r.record(fn, Actions(awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), in.Parameters))
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	})
}

func (r *Recorder) record(fn string, acts []Action) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range acts {
		r.uses[Use{Function: fn, Action: a}]++
	}
}

// Uses returns a copy of what was recorded, with the number of requests
// that performed each use.
func (r *Recorder) Uses() map[Use]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[Use]int, len(r.uses))
	for u, n := range r.uses {
		out[u] = n
	}
	return out
}

// String lists the uses, one a line, sorted.
func (r *Recorder) String() string {
	uses := r.Uses()
	lines := make([]string, 0, len(uses))
	for u, n := range uses {
		lines = append(lines, fmt.Sprintf("%s %s %s %d", u.Function, u.Action.Action, u.Resource, n))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// Actions maps one SDK operation call to the IAM actions it needs.
// service is the SDK's service id ("DynamoDB", "S3", "SQS"), op the
// operation name and input its typed input. An operation this package does
// not know maps to "<service>:<op>" on a KindOther resource, so it shows
// up as an ungranted action instead of being dropped.
func Actions(service, op string, input any) []Action {
	var acts []Action
	switch service {
	case dynamodb.ServiceID:
		acts = dynamoActions(input)
	case s3.ServiceID:
		acts = s3Actions(input)
	case sqs.ServiceID:
		acts = sqsActions(input)
	case eventbridge.ServiceID:
		acts = eventsActions(input) // events.go
	}
	if acts == nil {
		return []Action{{Action: strings.ToLower(service) + ":" + op, Resource: Resource{Kind: KindOther}}}
	}
	return acts
}

func act(action, kind string, name *string) Action {
	return Action{Action: action, Resource: Resource{Kind: kind, Name: aws.ToString(name)}}
}

func objAct(action string, bucket, key *string) Action {
	return Action{Action: action, Resource: Resource{Kind: KindObject, Name: aws.ToString(bucket), Key: aws.ToString(key)}}
}

func dynamoActions(input any) []Action {
	table := func(action string, name *string) []Action { return []Action{act("dynamodb:"+action, KindTable, name)} }
	// A query or scan of an index is authorized on the index's ARN
	// (table/<t>/index/<i>), not on the table's.
	indexed := func(action string, name, index *string) []Action {
		if index != nil {
			return []Action{{Action: "dynamodb:" + action, Resource: Resource{Kind: KindIndex, Name: aws.ToString(name), Index: *index}}}
		}
		return table(action, name)
	}
	switch in := input.(type) {
	case *dynamodb.GetItemInput:
		return table("GetItem", in.TableName)
	case *dynamodb.PutItemInput:
		return table("PutItem", in.TableName)
	case *dynamodb.UpdateItemInput:
		return table("UpdateItem", in.TableName)
	case *dynamodb.DeleteItemInput:
		return table("DeleteItem", in.TableName)
	case *dynamodb.QueryInput:
		return indexed("Query", in.TableName, in.IndexName)
	case *dynamodb.ScanInput:
		return indexed("Scan", in.TableName, in.IndexName)
	case *dynamodb.DescribeTableInput:
		return table("DescribeTable", in.TableName)
	case *dynamodb.BatchGetItemInput:
		return perTable("dynamodb:BatchGetItem", keys(in.RequestItems))
	case *dynamodb.BatchWriteItemInput:
		return perTable("dynamodb:BatchWriteItem", keys(in.RequestItems))
	case *dynamodb.TransactWriteItemsInput:
		// Each part needs its own item action; TransactWriteItems itself
		// needs none.
		var acts []Action
		for _, it := range in.TransactItems {
			switch {
			case it.Put != nil:
				acts = append(acts, act("dynamodb:PutItem", KindTable, it.Put.TableName))
			case it.Update != nil:
				acts = append(acts, act("dynamodb:UpdateItem", KindTable, it.Update.TableName))
			case it.Delete != nil:
				acts = append(acts, act("dynamodb:DeleteItem", KindTable, it.Delete.TableName))
			case it.ConditionCheck != nil:
				acts = append(acts, act("dynamodb:ConditionCheckItem", KindTable, it.ConditionCheck.TableName))
			}
		}
		return acts
	case *dynamodb.BatchExecuteStatementInput:
		// PartiQL: each statement needs its own action on its table.
		var acts []Action
		for _, st := range in.Statements {
			verb, name := partiQLTarget(aws.ToString(st.Statement))
			acts = append(acts, act("dynamodb:PartiQL"+verb, KindTable, &name))
		}
		return acts
	case *dynamodb.TransactGetItemsInput:
		var acts []Action
		for _, it := range in.TransactItems {
			if it.Get != nil {
				acts = append(acts, act("dynamodb:GetItem", KindTable, it.Get.TableName))
			}
		}
		return acts
	}
	return nil
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func perTable(action string, tables []string) []Action {
	acts := make([]Action, len(tables))
	for i, t := range tables {
		acts[i] = Action{Action: action, Resource: Resource{Kind: KindTable, Name: t}}
	}
	return acts
}

func s3Actions(input any) []Action {
	obj := func(action string, bucket, key *string) []Action { return []Action{objAct("s3:"+action, bucket, key)} }
	bkt := func(action string, bucket *string) []Action { return []Action{act("s3:"+action, KindBucket, bucket)} }
	// A listing is authorized on the bucket, with its prefix as s3:prefix.
	list := func(bucket, prefix *string) []Action {
		return []Action{{Action: "s3:ListBucket", Resource: Resource{Kind: KindBucket, Name: aws.ToString(bucket), Key: aws.ToString(prefix)}}}
	}
	switch in := input.(type) {
	case *s3.GetObjectInput:
		if in.VersionId != nil { // a named version is authorized by s3:GetObjectVersion alone
			return obj("GetObjectVersion", in.Bucket, in.Key)
		}
		return obj("GetObject", in.Bucket, in.Key)
	case *s3.HeadObjectInput:
		if in.VersionId != nil {
			return obj("GetObjectVersion", in.Bucket, in.Key)
		}
		return obj("GetObject", in.Bucket, in.Key)
	case *s3.GetBucketVersioningInput:
		return bkt("GetBucketVersioning", in.Bucket)
	case *s3.ListObjectVersionsInput:
		// Authorized on the bucket, with its prefix as s3:prefix, as ListBucket.
		return []Action{{Action: "s3:ListBucketVersions", Resource: Resource{Kind: KindBucket, Name: aws.ToString(in.Bucket), Key: aws.ToString(in.Prefix)}}}
	case *s3.PutObjectInput:
		return obj("PutObject", in.Bucket, in.Key)
	case *s3.CreateMultipartUploadInput:
		return obj("PutObject", in.Bucket, in.Key)
	case *s3.UploadPartInput:
		return obj("PutObject", in.Bucket, in.Key)
	case *s3.CompleteMultipartUploadInput:
		return obj("PutObject", in.Bucket, in.Key)
	case *s3.AbortMultipartUploadInput:
		return obj("AbortMultipartUpload", in.Bucket, in.Key)
	case *s3.CopyObjectInput:
		src, srcKey, _ := strings.Cut(strings.TrimPrefix(aws.ToString(in.CopySource), "/"), "/")
		return []Action{objAct("s3:PutObject", in.Bucket, in.Key), objAct("s3:GetObject", &src, &srcKey)}
	case *s3.DeleteObjectInput:
		return obj("DeleteObject", in.Bucket, in.Key)
	case *s3.DeleteObjectsInput:
		// One action per object: each is authorized on its own key.
		var acts []Action
		if in.Delete != nil {
			for _, o := range in.Delete.Objects {
				acts = append(acts, objAct("s3:DeleteObject", in.Bucket, o.Key))
			}
		}
		if acts == nil {
			acts = obj("DeleteObject", in.Bucket, nil)
		}
		return acts
	case *s3.GetObjectTaggingInput:
		return obj("GetObjectTagging", in.Bucket, in.Key)
	case *s3.PutObjectTaggingInput:
		return obj("PutObjectTagging", in.Bucket, in.Key)
	case *s3.ListObjectsV2Input:
		return list(in.Bucket, in.Prefix)
	case *s3.ListObjectsInput:
		return list(in.Bucket, in.Prefix)
	case *s3.HeadBucketInput:
		return bkt("ListBucket", in.Bucket)
	}
	return nil
}

func sqsActions(input any) []Action {
	q := func(action string, url *string) []Action { return []Action{act("sqs:"+action, KindQueue, url)} }
	// A batch API is authorized by its single-message action.
	switch in := input.(type) {
	case *sqs.SendMessageInput:
		return q("SendMessage", in.QueueUrl)
	case *sqs.SendMessageBatchInput:
		return q("SendMessage", in.QueueUrl)
	case *sqs.ReceiveMessageInput:
		return q("ReceiveMessage", in.QueueUrl)
	case *sqs.DeleteMessageInput:
		return q("DeleteMessage", in.QueueUrl)
	case *sqs.DeleteMessageBatchInput:
		return q("DeleteMessage", in.QueueUrl)
	case *sqs.ChangeMessageVisibilityInput:
		return q("ChangeMessageVisibility", in.QueueUrl)
	case *sqs.ChangeMessageVisibilityBatchInput:
		return q("ChangeMessageVisibility", in.QueueUrl)
	case *sqs.GetQueueAttributesInput:
		return q("GetQueueAttributes", in.QueueUrl)
	case *sqs.GetQueueUrlInput:
		return q("GetQueueUrl", in.QueueName)
	case *sqs.PurgeQueueInput:
		return q("PurgeQueue", in.QueueUrl)
	}
	return nil
}

// partiQLTarget is a PartiQL statement's verb, as its IAM action names it
// (Insert, Update, Delete, Select), and its table (quoted or not).
func partiQLTarget(stmt string) (verb, table string) {
	f := strings.Fields(stmt)
	if len(f) == 0 {
		return "", ""
	}
	verb = strings.ToUpper(f[0])
	var rest []string
	switch verb {
	case "INSERT", "DELETE":
		if len(f) > 2 { // INSERT INTO t / DELETE FROM t
			rest = f[2:]
		}
	case "UPDATE":
		rest = f[1:]
	case "SELECT":
		for i, w := range f {
			if strings.EqualFold(w, "FROM") {
				rest = f[i+1:]
				break
			}
		}
	}
	if len(rest) > 0 {
		table = strings.Trim(rest[0], `"`)
	}
	return verb[:1] + strings.ToLower(verb[1:]), table
}
