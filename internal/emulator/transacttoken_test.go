package emulator

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The launcher applies a TransactWriteItems once per ClientRequestToken,
// as DynamoDB does (see motoLauncher): the SDK retries a transaction whose
// answer it lost with the same token, and a second application would
// decrement a counter twice. Each step sends one transaction that adds
// to a counter and says what the counter must read after it.
func TestTransactionTokenAppliesOnce(t *testing.T) {
	skipUnderShort(t)
	e := startTestMoto(t)
	ctx := context.Background()
	ddb := dynamodb.NewFromConfig(e.AWSConfig())
	if _, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("c"),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
	}); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	add := func(token, by string, cond bool) error {
		u := &ddbtypes.Update{TableName: aws.String("c"),
			Key:                       map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "n"}},
			UpdateExpression:          aws.String("ADD v :by"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":by": &ddbtypes.AttributeValueMemberN{Value: by}}}
		if cond {
			u.ConditionExpression = aws.String("attribute_not_exists(v)")
		}
		_, err := ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{ClientRequestToken: aws.String(token),
			TransactItems: []ddbtypes.TransactWriteItem{{Update: u}}})
		return err
	}
	var mismatch *ddbtypes.IdempotentParameterMismatchException
	var cancelled *ddbtypes.TransactionCanceledException
	for _, step := range []struct {
		name, token, by string
		cond            bool
		wantErr         any
		want            string
	}{
		{"first", "a", "1", false, nil, "1"},
		{"repeat answers success, applies nothing", "a", "1", false, nil, "1"},
		{"repeat with other parameters", "a", "2", false, &mismatch, "1"},
		{"another token applies", "b", "1", false, nil, "2"},
		{"cancelled", "c", "5", true, &cancelled, "2"},
		{"a cancelled one's token is not kept", "c", "5", false, nil, "7"},
	} {
		err := add(step.token, step.by, step.cond)
		switch {
		case step.wantErr == nil && err != nil:
			t.Fatalf("%s: %v", step.name, err)
		case step.wantErr != nil && !errors.As(err, step.wantErr):
			t.Fatalf("%s: got %v, want %T", step.name, err, step.wantErr)
		}
		got, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("c"),
			Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "n"}}, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if v := got.Item["v"].(*ddbtypes.AttributeValueMemberN).Value; v != step.want {
			t.Fatalf("%s: counter %s, want %s", step.name, v, step.want)
		}
	}
}
