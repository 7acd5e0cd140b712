package ddbwire_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/shared/ddbwire"
)

// order is a hook that logs its name around each call and attempt.
type order struct {
	name string
	log  *[]string
}

func (o *order) Call(ctx context.Context, c *ddbwire.Call, next func(context.Context) error) error {
	*o.log = append(*o.log, o.name+" call "+c.Service+"."+c.Operation)
	err := next(ctx)
	*o.log = append(*o.log, o.name+" done")
	return err
}

func (o *order) Attempt(_ context.Context, _ *ddbwire.Call, req *http.Request, send ddbwire.Send) (*http.Response, error) {
	*o.log = append(*o.log, o.name+" attempt")
	return send(req)
}

// TestInstall: hooks wrap calls in the order installed, once each however
// often installed; a copy of the config made before keeps its own hooks,
// as with the SDK's APIOptions; and the config's other sources stay.
func TestInstall(t *testing.T) {
	var log []string
	a, b := &order{"a", &log}, &order{"b", &log}
	_, srv := newRecorder(t)
	cfg := testConfig(srv.URL)
	cfg.ConfigSources = []any{"other"}
	ddbwire.Install(&cfg, a)
	before := cfg.Copy()
	ddbwire.Install(&cfg, b)
	ddbwire.Install(&cfg, a)
	if got := ddbwire.Hooks(cfg); len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("hooks %v", got)
	}
	if got := ddbwire.Hooks(before); len(got) != 1 || got[0] != a {
		t.Fatalf("the earlier copy's hooks %v", got)
	}
	if len(cfg.ConfigSources) != 2 || cfg.ConfigSources[0] != "other" {
		t.Fatalf("config sources %v", cfg.ConfigSources)
	}
	lean, err := ddbwire.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lean.GetItem(context.Background(), minimalInput("GetItem").(*dynamodb.GetItemInput)); err != nil {
		t.Fatal(err)
	}
	want := []string{"a call DynamoDB.GetItem", "b call DynamoDB.GetItem", "a attempt", "b attempt", "b done", "a done"}
	if len(log) != len(want) {
		t.Fatalf("log %q, want %q", log, want)
	}
	for i := range want {
		if log[i] != want[i] {
			t.Fatalf("log %q, want %q", log, want)
		}
	}
}
