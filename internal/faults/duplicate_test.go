package faults

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// A duplicate reopens each received message it picks, with the handle
// the receiver got, and the receiver sees its messages as usual.
func TestDuplicateReopensReceivedMessages(t *testing.T) {
	inj, srv, c := setup(t, maxAttempts, Rule{Service: "SQS", Kind: Duplicate, Rate: 1, Count: 1})
	srv.reply = func(op string, _ int) (int, string) {
		if op == "ReceiveMessage" {
			return 200, `{"Messages":[{"MessageId":"m1","ReceiptHandle":"h1","Body":"a"},{"MessageId":"m2","ReceiptHandle":"h2","Body":"b"}]}`
		}
		return 200, "{}"
	}
	ctx := context.Background()
	out, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(srv.URL + "/q")})
	if err != nil || len(out.Messages) != 2 {
		t.Fatalf("receive: %v, %d messages; want 2", err, len(out.Messages))
	}
	if n := srv.hitCount("ChangeMessageVisibility"); n != 1 {
		t.Fatalf("%d ChangeMessageVisibility sent, want 1 (Count 1)", n)
	}
	srv.mu.Lock()
	last := srv.bodies[len(srv.bodies)-1]
	srv.mu.Unlock()
	if last["ReceiptHandle"] != "h1" || last["QueueUrl"] != srv.URL+"/q" {
		t.Errorf("reopened %v, want handle h1 of the queue received from", last)
	}
	if v, ok := last["VisibilityTimeout"]; ok && v != float64(0) {
		t.Errorf("visibility %v, want 0", v)
	}
	if got := inj.Counts()["SQS.ReceiveMessage duplicate"]; got != 1 {
		t.Errorf("counts %v, want one SQS.ReceiveMessage duplicate", inj.Counts())
	}
	// Other operations are left alone, and a disabled injector reopens
	// nothing.
	inj.Add(Rule{Service: "SQS", Kind: Duplicate, Rate: 1})
	inj.SetEnabled(false)
	if _, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(srv.URL + "/q")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(srv.URL + "/q"), MessageBody: aws.String("x")}); err != nil {
		t.Fatal(err)
	}
	if n := srv.hitCount("ChangeMessageVisibility"); n != 1 {
		t.Fatalf("%d ChangeMessageVisibility sent, want still 1", n)
	}
}

func TestDuplicateAppliesToSQSReceiveOnly(t *testing.T) {
	for _, tc := range []struct {
		rule Rule
		ok   bool
	}{
		{Rule{Kind: Duplicate, Rate: 0.1}, true},
		{Rule{Service: "SQS", Operation: "ReceiveMessage", Kind: Duplicate, Rate: 0.1}, true},
		{Rule{Service: "DynamoDB", Kind: Duplicate, Rate: 0.1}, false},
		{Rule{Service: "SQS", Operation: "SendMessage", Kind: Duplicate, Rate: 0.1}, false},
		{Rule{Service: "SQS", Kind: Duplicate, Code: "X", Rate: 0.1}, false},
	} {
		if err := tc.rule.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate = %v, want ok=%v", tc.rule, err, tc.ok)
		}
	}
}
