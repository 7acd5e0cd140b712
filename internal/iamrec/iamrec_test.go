package iamrec

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/google/go-cmp/cmp"
)

func TestActions(t *testing.T) {
	t.Parallel()
	tbl, q, b := aws.String("T"), aws.String("https://q/1/Q"), aws.String("B")
	table := Resource{Kind: KindTable, Name: "T"}
	queue := Resource{Kind: KindQueue, Name: "https://q/1/Q"}
	object := Resource{Kind: KindObject, Name: "B"}
	cases := []struct {
		name    string
		service string
		op      string
		input   any
		want    []Action
	}{
		{"get item", dynamodb.ServiceID, "GetItem", &dynamodb.GetItemInput{TableName: tbl}, []Action{{"dynamodb:GetItem", table}}},
		{"query on the table", dynamodb.ServiceID, "Query", &dynamodb.QueryInput{TableName: tbl}, []Action{{"dynamodb:Query", table}}},
		{"query on an index", dynamodb.ServiceID, "Query", &dynamodb.QueryInput{TableName: tbl, IndexName: aws.String("due")},
			[]Action{{"dynamodb:Query", Resource{Kind: KindIndex, Name: "T", Index: "due"}}}},
		{"batch get", dynamodb.ServiceID, "BatchGetItem", &dynamodb.BatchGetItemInput{RequestItems: map[string]dtypes.KeysAndAttributes{"T": {}, "U": {}}},
			[]Action{{"dynamodb:BatchGetItem", table}, {"dynamodb:BatchGetItem", Resource{Kind: KindTable, Name: "U"}}}},
		// Each part needs its item action; the transaction itself none.
		{"transaction", dynamodb.ServiceID, "TransactWriteItems", &dynamodb.TransactWriteItemsInput{TransactItems: []dtypes.TransactWriteItem{
			{Put: &dtypes.Put{TableName: tbl}}, {Update: &dtypes.Update{TableName: tbl}},
			{Delete: &dtypes.Delete{TableName: tbl}}, {ConditionCheck: &dtypes.ConditionCheck{TableName: tbl}},
		}}, []Action{{"dynamodb:PutItem", table}, {"dynamodb:UpdateItem", table}, {"dynamodb:DeleteItem", table}, {"dynamodb:ConditionCheckItem", table}}},
		{"get object", s3.ServiceID, "GetObject", &s3.GetObjectInput{Bucket: b}, []Action{{"s3:GetObject", object}}},
		{"head object reads", s3.ServiceID, "HeadObject", &s3.HeadObjectInput{Bucket: b}, []Action{{"s3:GetObject", object}}},
		// A named version needs s3:GetObjectVersion, and not s3:GetObject.
		{"get a version", s3.ServiceID, "GetObject", &s3.GetObjectInput{Bucket: b, VersionId: aws.String("v1")}, []Action{{"s3:GetObjectVersion", object}}},
		{"head a version", s3.ServiceID, "HeadObject", &s3.HeadObjectInput{Bucket: b, VersionId: aws.String("v1")}, []Action{{"s3:GetObjectVersion", object}}},
		{"versioning is on the bucket", s3.ServiceID, "GetBucketVersioning", &s3.GetBucketVersioningInput{Bucket: b}, []Action{{"s3:GetBucketVersioning", Resource{Kind: KindBucket, Name: "B"}}}},
		{"version listing names its prefix", s3.ServiceID, "ListObjectVersions", &s3.ListObjectVersionsInput{Bucket: b, Prefix: aws.String("inputs/k/corpus/")},
			[]Action{{"s3:ListBucketVersions", Resource{Kind: KindBucket, Name: "B", Key: "inputs/k/corpus/"}}}},
		{"put object", s3.ServiceID, "PutObject", &s3.PutObjectInput{Bucket: b}, []Action{{"s3:PutObject", object}}},
		// Object actions name their key, for grants on key patterns.
		{"put object names its key", s3.ServiceID, "PutObject", &s3.PutObjectInput{Bucket: b, Key: aws.String("jobs/j/plan/s.json")},
			[]Action{{"s3:PutObject", Resource{Kind: KindObject, Name: "B", Key: "jobs/j/plan/s.json"}}}},
		{"copy reads its source's key", s3.ServiceID, "CopyObject", &s3.CopyObjectInput{Bucket: b, Key: aws.String("jobs/x"), CopySource: aws.String("C/inputs/o/a.txt")},
			[]Action{{"s3:PutObject", Resource{Kind: KindObject, Name: "B", Key: "jobs/x"}}, {"s3:GetObject", Resource{Kind: KindObject, Name: "C", Key: "inputs/o/a.txt"}}}},
		{"delete objects, each on its key", s3.ServiceID, "DeleteObjects", &s3.DeleteObjectsInput{Bucket: b, Delete: &s3types.Delete{Objects: []s3types.ObjectIdentifier{{Key: aws.String("jobs/j/a")}, {Key: aws.String("jobs/j/b")}}}},
			[]Action{{"s3:DeleteObject", Resource{Kind: KindObject, Name: "B", Key: "jobs/j/a"}}, {"s3:DeleteObject", Resource{Kind: KindObject, Name: "B", Key: "jobs/j/b"}}}},
		{"list is on the bucket", s3.ServiceID, "ListObjectsV2", &s3.ListObjectsV2Input{Bucket: b}, []Action{{"s3:ListBucket", Resource{Kind: KindBucket, Name: "B"}}}},
		// A listing names its prefix, for grants conditioned on s3:prefix.
		{"list names its prefix", s3.ServiceID, "ListObjectsV2", &s3.ListObjectsV2Input{Bucket: b, Prefix: aws.String("inputs/k/corpus/")},
			[]Action{{"s3:ListBucket", Resource{Kind: KindBucket, Name: "B", Key: "inputs/k/corpus/"}}}},
		{"get tags", s3.ServiceID, "GetObjectTagging", &s3.GetObjectTaggingInput{Bucket: b}, []Action{{"s3:GetObjectTagging", object}}},
		{"put tags", s3.ServiceID, "PutObjectTagging", &s3.PutObjectTaggingInput{Bucket: b}, []Action{{"s3:PutObjectTagging", object}}},
		// PartiQL statements need an action per statement on their table.
		{"partiql batch", dynamodb.ServiceID, "BatchExecuteStatement", &dynamodb.BatchExecuteStatementInput{Statements: []dtypes.BatchStatementRequest{
			{Statement: aws.String(`INSERT INTO "T" VALUE {'pk': ?}`)}, {Statement: aws.String(`SELECT * FROM "U" WHERE pk = ?`)}}},
			[]Action{{"dynamodb:PartiQLInsert", Resource{Kind: KindTable, Name: "T"}}, {"dynamodb:PartiQLSelect", Resource{Kind: KindTable, Name: "U"}}}},
		{"send batch", sqs.ServiceID, "SendMessageBatch", &sqs.SendMessageBatchInput{QueueUrl: q}, []Action{{"sqs:SendMessage", queue}}},
		{"receive", sqs.ServiceID, "ReceiveMessage", &sqs.ReceiveMessageInput{QueueUrl: q}, []Action{{"sqs:ReceiveMessage", queue}}},
		{"delete batch", sqs.ServiceID, "DeleteMessageBatch", &sqs.DeleteMessageBatchInput{QueueUrl: q}, []Action{{"sqs:DeleteMessage", queue}}},
		{"visibility", sqs.ServiceID, "ChangeMessageVisibility", &sqs.ChangeMessageVisibilityInput{QueueUrl: q}, []Action{{"sqs:ChangeMessageVisibility", queue}}},
		{"visibility batch", sqs.ServiceID, "ChangeMessageVisibilityBatch", &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: q},
			[]Action{{"sqs:ChangeMessageVisibility", queue}}},
		// Unknown operations are kept, so they show up as ungranted.
		{"unknown", sqs.ServiceID, "TagQueue", &sqs.TagQueueInput{QueueUrl: q}, []Action{{"sqs:TagQueue", Resource{Kind: KindOther}}}},
		{"other service", "CloudFormation", "CreateStack", nil, []Action{{"cloudformation:CreateStack", Resource{Kind: KindOther}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(c.want, Actions(c.service, c.op, c.input)); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
		})
	}
}

var errStop = errors.New("stopped before sending")

// offline is a config whose clients fail every request before it leaves
// the process, after the Initialize step has run.
func offline() aws.Config {
	return aws.Config{
		Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""),
		BaseEndpoint: aws.String("http://127.0.0.1:1"),
		APIOptions: []func(*middleware.Stack) error{func(st *middleware.Stack) error {
			return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("stop",
				func(context.Context, middleware.FinalizeInput, middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					return middleware.FinalizeOutput{}, middleware.Metadata{}, errStop
				}), middleware.Before)
		}},
	}
}

// The recorder attributes each request to its context's function, once
// per call however often it is installed, and ignores untagged requests.
// A presigned URL counts as the signer's read.
func TestRecorderAttributesTaggedRequests(t *testing.T) {
	t.Parallel()
	rec := New()
	cfg := offline()
	rec.Install(&cfg)
	rec.Install(&cfg)
	db := dynamodb.NewFromConfig(cfg)
	q := sqs.NewFromConfig(cfg)
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	ctx := context.Background()
	api, sweep := WithFunction(ctx, FnAPI), WithFunction(ctx, FnSweep)

	_, _ = db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("T"), Key: map[string]dtypes.AttributeValue{"pk": &dtypes.AttributeValueMemberS{Value: "x"}}})
	_, _ = db.GetItem(api, &dynamodb.GetItemInput{TableName: aws.String("T"), Key: map[string]dtypes.AttributeValue{"pk": &dtypes.AttributeValueMemberS{Value: "x"}}})
	_, _ = q.DeleteMessageBatch(sweep, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String("http://q/1/Q"),
		Entries: []sqstypes.DeleteMessageBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: aws.String("r")}}})
	if _, err := s3.NewPresignClient(s3c).PresignGetObject(api, &s3.GetObjectInput{Bucket: aws.String("B"), Key: aws.String("k")},
		s3.WithPresignExpires(time.Minute)); err != nil && !errors.Is(err, errStop) {
		t.Logf("presign: %v", err)
	}
	want := map[Use]int{
		{FnAPI, Action{"dynamodb:GetItem", Resource{Kind: KindTable, Name: "T"}}}:               1,
		{FnSweep, Action{"sqs:DeleteMessage", Resource{Kind: KindQueue, Name: "http://q/1/Q"}}}: 1,
		{FnAPI, Action{"s3:GetObject", Resource{Kind: KindObject, Name: "B", Key: "k"}}}:        1,
	}
	if diff := cmp.Diff(want, rec.Uses()); diff != "" {
		t.Errorf("uses (-want +got):\n%s", diff)
	}
}
