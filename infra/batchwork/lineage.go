package batchwork

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/lineage"
)

// OpenLineage is where the installation sends OpenLineage run events of
// its jobs (shared/lineage, docs/lineage.md): Props.OpenLineage. Every
// function that publishes events gets the OPENLINEAGE_* variables, as the
// outbox's records must wait for the same destinations whichever
// function publishes them.
type OpenLineage struct {
	// URL is the endpoint's base URL (OPENLINEAGE_URL), e.g.
	// https://marquez.example.com.
	URL string
	// Endpoint is the path events are POSTed to under URL
	// (OPENLINEAGE_ENDPOINT); default api/v1/lineage.
	Endpoint string
	// Namespace is the jobs' namespace (OPENLINEAGE_NAMESPACE); default
	// batchwork://<the installation's table>.
	Namespace string
	// APIKey, when set, is sent as a bearer token (OPENLINEAGE_API_KEY).
	// It is an environment variable of the functions, readable by whoever
	// may read their configuration: give them a key that can only write
	// lineage.
	APIKey string
}

// lineageEnv checks p's OpenLineage and returns the functions' variables
// (nil when unset). A malformed URL panics at synth with the field.
func lineageEnv(p Props) map[string]string {
	if p.OpenLineage == nil || p.OpenLineage.URL == "" {
		return nil
	}
	o := p.OpenLineage
	env := map[string]string{lineage.EnvURL: o.URL, lineage.EnvEndpoint: o.Endpoint, lineage.EnvNamespace: o.Namespace, lineage.EnvAPIKey: o.APIKey}
	for k, v := range env {
		if v == "" {
			delete(env, k)
		}
	}
	if _, err := lineage.ConfigFromEnv(func(k string) string { return env[k] }); err != nil {
		panic(fmt.Sprintf("batchwork: OpenLineage: %v", err))
	}
	return env
}

// grantLineageReads lets the functions that publish events but read no
// job objects (claim, which can fail a job) read the plans, whose pinned
// ETags a run event names.
func grantLineageReads(b *Batchwork) {
	if len(b.lineage) == 0 {
		return
	}
	for name, g := range permissions {
		if fn := b.Functions[name]; fn != nil && g.events && !g.read {
			awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
				Grantee: fn, Actions: jsii.Strings("s3:GetObject"),
				ResourceArns: &[]*string{b.Bucket.ArnForObjects(jsii.String(blob.PlanKey("*", "*")))},
			})
		}
	}
}
