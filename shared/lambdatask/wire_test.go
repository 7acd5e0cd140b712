package lambdatask

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestWire pins the JSON a function sees and answers with: a renamed
// field or tag here breaks every deployed function.
func TestWire(t *testing.T) {
	t.Parallel()
	off := int64(7)
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"event", Event{
			Task:              TaskRef{Job: "j", Stage: "s", Partition: 2, Attempt: 3},
			Params:            map[string]string{"k": "v"},
			Input:             &Input{Bucket: "b", Key: "in/a", Start: 4, End: 9, ETag: "e", VersionID: "v1"},
			Shuffle:           &Shuffle{Bucket: "b", Keys: []string{"x"}},
			Format:            "csv",
			OutputPrefix:      "s3://b/jobs/p/",
			Outputs:           []string{"o0"},
			Deadline:          "2030-01-01T00:00:00Z",
			Resume:            &Resume{Offset: 5, State: []byte("st")},
			CheckpointOutputs: []string{"c0"},
		}, `{"task":{"job":"j","stage":"s","partition":2,"attempt":3},"params":{"k":"v"},` +
			`"input":{"bucket":"b","key":"in/a","start":4,"end":9,"etag":"e","versionId":"v1"},` +
			`"shuffle":{"bucket":"b","keys":["x"]},"format":"csv","outputPrefix":"s3://b/jobs/p/","outputs":["o0"],` +
			`"deadline":"2030-01-01T00:00:00Z","resume":{"offset":5,"state":"c3Q="},"checkpointOutputs":["c0"]}`},
		{"joining event", Event{
			Params:  map[string]string{},
			Source:  "orders",
			Shuffle: &Shuffle{Bucket: "b", Keys: []string{"x", "y"}, Sources: []ShuffleSource{{Source: "orders", Keys: []string{"x"}}, {Source: "customers", Keys: []string{"y"}}}},
		}, `{"task":{"job":"","stage":"","partition":0,"attempt":0},"params":{},` +
			`"shuffle":{"bucket":"b","keys":["x","y"],"sources":[{"source":"orders","keys":["x"]},{"source":"customers","keys":["y"]}]},` +
			`"format":"","source":"orders","outputPrefix":"","outputs":null,"deadline":""}`},
		{"bare event", Event{Params: map[string]string{}},
			`{"task":{"job":"","stage":"","partition":0,"attempt":0},"params":{},"format":"","outputPrefix":"","outputs":null,"deadline":""}`},
		{"response", Response{
			Outputs:    []Output{{Part: 1, Key: "k"}},
			Error:      "bad",
			Permanent:  true,
			Rejects:    []Reject{{Record: "r", Reason: "why", Offset: &off}, {Record: "q"}},
			Checkpoint: &Checkpoint{Offset: 9, State: []byte("st")},
		}, `{"outputs":[{"part":1,"key":"k"}],"error":"bad","permanent":true,` +
			`"rejects":[{"record":"r","reason":"why","offset":7},{"record":"q","reason":""}],"checkpoint":{"offset":9,"state":"c3Q="}}`},
		{"bare response", Response{}, `{"outputs":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := json.Marshal(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestFunctionErrorMessage: the message of Lambda's error payloads, the
// raw payload when it is not one, cut on a rune boundary.
func TestFunctionErrorMessage(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 1500) // 3,000 bytes
	tests := []struct{ name, raw, want string }{
		{"type and message", `{"errorMessage":"boom","errorType":"ValueError"}`, "ValueError: boom"},
		{"message only", `{"errorMessage":"boom"}`, "boom"},
		{"not an error payload", `{"x":1}`, `{"x":1}`},
		{"not JSON", `oops`, "oops"},
		{"cut", long, long[:2000] + "..."},
	}
	for _, tt := range tests {
		if got := FunctionErrorMessage([]byte(tt.raw)); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}
