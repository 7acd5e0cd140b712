package lambdahttp

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/batchwork/batchwork/shared/principal"
)

// The owner the handler sees comes from the authenticated principal, mapped
// by the mode; the principal travels for audit; a client's own headers
// never get through.
func TestAdaptSetsOwnerFromPrincipal(t *testing.T) {
	t.Parallel()
	const session = "arn:aws:sts::123456789012:assumed-role/etl/alice"
	cases := []struct {
		name, arn string
		mode      principal.Mode
		wantOwner string
		wantPrinc string
	}{
		{"role mode", session, principal.ModeRole, "arn:aws:iam::123456789012:role/etl", session},
		{"session mode", session, principal.ModeSession, session, session},
		{"no principal", "", principal.ModeRole, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var owner, princ string
			h := Adapt(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				owner, princ = r.Header.Get(OwnerHeader), r.Header.Get(PrincipalHeader)
			}), tc.mode)
			ev := events.APIGatewayV2HTTPRequest{RawPath: "/jobs", Headers: map[string]string{OwnerHeader: "forged", PrincipalHeader: "forged"}}
			ev.RequestContext.HTTP.Method = http.MethodGet
			if tc.arn != "" {
				ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
					IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: tc.arn},
				}
			}
			if _, err := h(context.Background(), ev); err != nil {
				t.Fatal(err)
			}
			if owner != tc.wantOwner || princ != tc.wantPrinc {
				t.Errorf("owner %q principal %q, want %q and %q", owner, princ, tc.wantOwner, tc.wantPrinc)
			}
		})
	}
}
