package dynamo

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// stmtScript answers BatchExecuteStatement with a per-statement error code
// from a script, by try ("" succeeds), and records each try's statements.
type stmtScript struct {
	API
	codes [][]types.BatchStatementErrorCodeEnum // per try, per statement sent
	sent  [][]string                            // per try: each statement's sk parameter
}

func (f *stmtScript) BatchExecuteStatement(_ context.Context, in *dynamodb.BatchExecuteStatementInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error) {
	try := len(f.sent)
	var sks []string
	out := &dynamodb.BatchExecuteStatementOutput{}
	for i, st := range in.Statements {
		sks = append(sks, skParam(st))
		var r types.BatchStatementResponse
		if try < len(f.codes) && i < len(f.codes[try]) && f.codes[try][i] != "" {
			r.Error = &types.BatchStatementError{Code: f.codes[try][i], Message: aws.String("scripted")}
		}
		out.Responses = append(out.Responses, r)
	}
	f.sent = append(f.sent, sks)
	return out, nil
}

func skParam(st types.BatchStatementRequest) string {
	// InsertStatement sorts its attributes: find sk by name.
	names := strings.Split(strings.TrimSuffix(strings.SplitN(aws.ToString(st.Statement), "{", 2)[1], "}"), ", ")
	for i, n := range names {
		if strings.HasPrefix(n, "'sk'") {
			return st.Parameters[i].(*types.AttributeValueMemberS).Value
		}
	}
	return ""
}

func TestInsertItems(t *testing.T) {
	t.Parallel()
	items := func(n int) []map[string]types.AttributeValue {
		var its []map[string]types.AttributeValue
		for i := range n {
			its = append(its, map[string]types.AttributeValue{attrPK: sv("P"), attrSK: sv(fmt.Sprintf("%06d", i)), "x": nv(1)})
		}
		return its
	}
	const (
		dup      = types.BatchStatementErrorCodeEnumDuplicateItem
		throttle = types.BatchStatementErrorCodeEnumThrottlingError
		invalid  = types.BatchStatementErrorCodeEnumValidationError
	)
	cases := []struct {
		name    string
		n       int
		codes   [][]types.BatchStatementErrorCodeEnum
		wantErr bool
		tries   []int // statements sent per try
	}{
		{"25 to a request", 60, nil, false, []int{25, 25, 10}},
		{"existing items are left alone", 3, [][]types.BatchStatementErrorCodeEnum{{dup, "", dup}}, false, []int{3}},
		{"throttled statements are sent again, alone", 3, [][]types.BatchStatementErrorCodeEnum{{throttle, dup, throttle}, {"", ""}}, false, []int{3, 2}},
		{"an invalid statement is an error", 2, [][]types.BatchStatementErrorCodeEnum{{"", invalid}}, true, []int{2}},
		{"throttled to the end is an error", 1, [][]types.BatchStatementErrorCodeEnum{{throttle}, {throttle}, {throttle}, {throttle}, {throttle}, {throttle}}, true, []int{1, 1, 1, 1, 1, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := &stmtScript{codes: c.codes}
			s := New(f, "T")
			err := s.insertItems(context.Background(), items(c.n))
			if (err != nil) != c.wantErr {
				t.Fatalf("insertItems: %v, want error %v", err, c.wantErr)
			}
			var got []int
			for _, sent := range f.sent {
				got = append(got, len(sent))
			}
			if fmt.Sprint(got) != fmt.Sprint(c.tries) {
				t.Fatalf("statements per try %v, want %v", got, c.tries)
			}
			if c.name == "throttled statements are sent again, alone" && fmt.Sprint(f.sent[1]) != "[000000 000002]" {
				t.Fatalf("second try sent %v, want the two throttled ones", f.sent[1])
			}
		})
	}
}
