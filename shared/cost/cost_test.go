package cost

import (
	"math"
	"reflect"
	"testing"
)

func TestPrice(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Counts
		want Dollars
	}{
		{"nothing", Counts{}, Dollars{}},
		{"a million write units", Counts{DynamoWriteUnits: 1e6}, Dollars{DynamoDB: 0.625, Requests: 0.625}},
		{"reads and writes", Counts{DynamoReadUnits: 2e6, DynamoWriteUnits: 1e6}, Dollars{DynamoDB: 0.875, Requests: 0.875}},
		{"SQS", Counts{SQSRequests: 1e6}, Dollars{SQS: 0.40, Requests: 0.40}},
		{"S3 tiers, deletes free", Counts{S3Tier1: 1000, S3Tier2: 1000, S3Free: 1e6}, Dollars{S3: 0.0054, Requests: 0.0054}},
		{"Lambda and events", Counts{LambdaInvokes: 1e6, Events: 1e6}, Dollars{Lambda: 0.20, EventBridge: 1, Requests: 1.20}},
		{"compute is not a request", Counts{ComputeSeconds: 100, GBSeconds: 100}, Dollars{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Price(tc.c)
			for _, p := range [][2]float64{{got.DynamoDB, tc.want.DynamoDB}, {got.SQS, tc.want.SQS}, {got.S3, tc.want.S3},
				{got.Lambda, tc.want.Lambda}, {got.EventBridge, tc.want.EventBridge}, {got.Requests, tc.want.Requests}} {
				if math.Abs(p[0]-p[1]) > 1e-12 {
					t.Fatalf("Price(%+v) = %+v, want %+v", tc.c, got, tc.want)
				}
			}
		})
	}
}

func TestS3Tier(t *testing.T) {
	for op, want := range map[string]int{
		"PutObject": S3Tier1, "CopyObject": S3Tier1, "ListObjectsV2": S3Tier1, "CreateMultipartUpload": S3Tier1,
		"UploadPart": S3Tier1, "CompleteMultipartUpload": S3Tier1,
		"GetObject": S3Tier2, "HeadObject": S3Tier2,
		"DeleteObject": S3FreeTier, "DeleteObjects": S3FreeTier, "AbortMultipartUpload": S3FreeTier,
	} {
		if got := S3Tier(op); got != want {
			t.Errorf("S3Tier(%s) = %d, want %d", op, got, want)
		}
	}
}

func TestAddAndFields(t *testing.T) {
	a := Counts{DynamoRequests: 1, SQSRequests: 0.5, GBSeconds: 2}
	a.Add(Counts{DynamoRequests: 2, SQSRequests: 0.25, S3Free: 1})
	if a != (Counts{DynamoRequests: 3, SQSRequests: 0.75, S3Free: 1, GBSeconds: 2}) {
		t.Fatalf("Add: %+v", a)
	}
	// Every field is named once, so the store keeps every count.
	var c Counts
	seen := map[string]bool{}
	for i, f := range c.Fields() {
		if seen[f.Name] {
			t.Fatalf("field name %s twice", f.Name)
		}
		seen[f.Name] = true
		*f.Value = float64(i + 1)
	}
	var sum Counts
	sum.Add(c)
	if sum != c || len(seen) != reflect.TypeOf(c).NumField() {
		t.Fatalf("Fields does not cover Counts: %+v (%d names)", c, len(seen))
	}
	if Round(1.0/3) != 0.333333 {
		t.Fatalf("Round(1/3) = %v", Round(1.0/3))
	}
}
