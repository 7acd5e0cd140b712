package dynamo

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// txScript answers TransactWriteItems from a script of cancellation
// reasons (nil: success) and records each request's token.
type txScript struct {
	API
	answers [][]string
	tokens  []string
}

func (f *txScript) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	f.tokens = append(f.tokens, aws.ToString(in.ClientRequestToken))
	// The SDK fills a token into the caller's input when it has none.
	if in.ClientRequestToken == nil {
		in.ClientRequestToken = aws.String("sdk-token-" + string(rune('a'+len(f.tokens))))
	}
	reasons := f.answers[0]
	f.answers = f.answers[1:]
	if reasons == nil {
		return &dynamodb.TransactWriteItemsOutput{}, nil
	}
	tce := &types.TransactionCanceledException{}
	for _, r := range reasons {
		tce.CancellationReasons = append(tce.CancellationReasons, types.CancellationReason{Code: aws.String(r)})
	}
	return nil, tce
}

func TestTransactRetries(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		answers   [][]string
		wantCalls int
		wantErr   bool
	}{
		{"conflict then success", [][]string{{"TransactionConflict", "None"}, nil}, 2, false},
		{"condition failed is an answer", [][]string{{"ConditionalCheckFailed", "None"}}, 1, true},
		// The last committer: its task conflicted while its counter's guard
		// failed; the resend gives the definitive answer.
		{"conflict beside a failed condition", [][]string{{"TransactionConflict", "ConditionalCheckFailed"}, {"None", "ConditionalCheckFailed"}}, 2, true},
		{"throttled then success", [][]string{{"ThrottlingError"}, nil}, 2, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &txScript{answers: tc.answers}
			s := New(f, "t")
			err := s.transact(context.Background(), &dynamodb.TransactWriteItemsInput{})
			if len(f.tokens) != tc.wantCalls || (err != nil) != tc.wantErr {
				t.Fatalf("%d calls, err %v; want %d calls, error %v", len(f.tokens), err, tc.wantCalls, tc.wantErr)
			}
			for i, tok := range f.tokens {
				if tok != "" {
					t.Errorf("try %d sent token %q; each try must leave the token to the SDK", i+1, tok)
				}
			}
		})
	}
}
