package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/batchwork/batchwork/shared/ddbwire"
)

// reqLabels counts requests by what they touch: the operation and, for
// DynamoDB, the kinds of the items (a key's partition prefix and, for a
// job's partition, the sort key's), so a firing's requests can be
// attributed to the schedule, the job's submission and the shard runs.
type reqLabels struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *reqLabels) install(cfg *aws.Config) {
	ddbwire.Install(cfg, l)
	cfg.APIOptions = append(cfg.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("bench.reqlabels",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				l.add(awsmiddleware.GetOperationName(ctx) + " " + requestLabel(in.Parameters))
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	})
}

// Call counts a call of a lean client (the store's DynamoDB client or the
// queues' SQS client: ddbwire.Hook), as the middleware counts the SDK's.
func (l *reqLabels) Call(ctx context.Context, c *ddbwire.Call, next func(context.Context) error) error {
	l.add(c.Operation + " " + requestLabel(c.Input))
	return next(ctx)
}

// Attempt sends the attempt.
func (l *reqLabels) Attempt(_ context.Context, _ *ddbwire.Call, req *http.Request, send ddbwire.Send) (*http.Response, error) {
	return send(req)
}

func (l *reqLabels) add(k string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		l.n = map[string]int{}
	}
	l.n[k]++
}

func (l *reqLabels) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.n))
	for k, v := range l.n {
		out[k] = v
	}
	return out
}

// print writes the labels counted between two snapshots, per firing,
// largest first.
func (l *reqLabels) print(before, after map[string]int, firings int) {
	type row struct {
		k string
		n int
	}
	var rows []row
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			rows = append(rows, row{k, d})
		}
	}
	slices.SortFunc(rows, func(a, b row) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return strings.Compare(a.k, b.k)
	})
	for _, r := range rows {
		fmt.Printf("    %6.2f  %s\n", float64(r.n)/float64(firings), r.k)
	}
}

// itemKind names a key by its partition key's prefix (and the sort key's
// for the few partitions that hold several kinds).
func itemKind(key map[string]ddbtypes.AttributeValue) string {
	s := func(n string) string {
		if v, ok := key[n].(*ddbtypes.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	pk, sk := s("pk"), s("sk")
	p, _, _ := strings.Cut(pk, "#")
	switch p {
	case "JOB", "OWN":
		k, _, _ := strings.Cut(sk, "#")
		return p + "/" + k
	}
	return p
}

func kinds(items []map[string]ddbtypes.AttributeValue) string {
	ks := make([]string, 0, len(items))
	for _, it := range items {
		ks = append(ks, itemKind(it))
	}
	slices.Sort(ks)
	return strings.Join(ks, ",")
}

func requestLabel(p any) string {
	switch in := p.(type) {
	case *dynamodb.GetItemInput:
		return itemKind(in.Key)
	case *dynamodb.PutItemInput:
		return itemKind(in.Item)
	case *dynamodb.UpdateItemInput:
		return itemKind(in.Key)
	case *dynamodb.DeleteItemInput:
		return itemKind(in.Key)
	case *dynamodb.QueryInput:
		if in.IndexName != nil {
			return "index " + *in.IndexName
		}
		for _, v := range in.ExpressionAttributeValues {
			if s, ok := v.(*ddbtypes.AttributeValueMemberS); ok {
				return itemKind(map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: s.Value}})
			}
		}
	case *dynamodb.BatchGetItemInput:
		var items []map[string]ddbtypes.AttributeValue
		for _, ka := range in.RequestItems {
			items = append(items, ka.Keys...)
		}
		return "[" + kinds(items) + "]"
	case *dynamodb.TransactWriteItemsInput:
		var items []map[string]ddbtypes.AttributeValue
		for _, it := range in.TransactItems {
			switch {
			case it.Put != nil:
				items = append(items, it.Put.Item)
			case it.Update != nil:
				items = append(items, it.Update.Key)
			case it.Delete != nil:
				items = append(items, it.Delete.Key)
			case it.ConditionCheck != nil:
				items = append(items, map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "check:" + itemKind(it.ConditionCheck.Key)}})
			}
		}
		return "[" + kinds(items) + "]"
	}
	return ""
}
