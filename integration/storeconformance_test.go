package integration

import (
	"testing"

	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control/storetest"
	"github.com/batchwork/batchwork/shared/ddbwire"
	"github.com/batchwork/batchwork/shared/dynamo"
)

// dynamo.Store meets the store port's conformance suite, which the unit
// tests run against their in-memory fake (TestFakeStoreConformance): the
// cases share one table, each with its own jobs. It runs over both
// DynamoDB clients: the lean one every process uses (shared/ddbwire) and
// the SDK's (BATCHWORK_DYNAMO_CLIENT=sdk), over the HTTP client every
// process uses (awsconf.Harden's: the synchronous transport of
// shared/synchttp unless BATCHWORK_HTTP_TRANSPORT=net).
func TestDynamoStoreConformance(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	cfg := e.cfg
	awsconf.Harden(&cfg)
	for _, client := range []string{"lean", "sdk"} {
		t.Run(client, func(t *testing.T) {
			db, err := ddbwire.ForStore(cfg, client)
			if err != nil {
				t.Fatal(err)
			}
			store := dynamo.New(db, e.r.Resources.Table)
			storetest.Run(t, func(*testing.T) storetest.Store { return store })
		})
	}
}
