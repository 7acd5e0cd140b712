package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/batchwork/batchwork/integration/fntest"
)

func TestMain(m *testing.M) { fntest.Main(m, main) }

// Without its configuration the function exits at once with status 1,
// naming every missing variable and no other.
func TestMissingEnvironment(t *testing.T) { fntest.MissingEnvironment(t) }

var wired = fntest.Wire

// The handler built from the environment serves API Gateway requests
// against the deployed resources, with the IAM principal as the owner.
func TestHandlerServesAPIGatewayRequests(t *testing.T) {
	w, _ := wired(t)
	h := handler(w)
	ctx := context.Background()
	req := func(method, path, principal, body string, headers map[string]string) events.APIGatewayV2HTTPResponse {
		t.Helper()
		ev := events.APIGatewayV2HTTPRequest{RawPath: path, Body: body, Headers: headers}
		ev.RequestContext.HTTP.Method = method
		if principal != "" {
			ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: principal},
			}
		}
		resp, err := h(ctx, ev)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return resp
	}
	const alice, bob = "arn:aws:iam::123456789012:user/alice", "arn:aws:iam::123456789012:user/bob"
	spec := `{"name":"fn","stages":[{"name":"s","task":"diamond.step","partitions":{"count":2}}]}`

	resp := req(http.MethodPost, "/jobs", alice, spec, map[string]string{"Idempotency-Key": "k1"})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("submit: %d %s, want 201", resp.StatusCode, resp.Body)
	}
	var sub struct {
		JobID string `json:"jobId"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &sub); err != nil || sub.JobID == "" {
		t.Fatalf("submit response %q: %v", resp.Body, err)
	}

	resp = req(http.MethodGet, "/jobs/"+sub.JobID, alice, "", nil)
	var st struct {
		State  string `json:"state"`
		Stages []struct {
			Total int `json:"total"`
		} `json:"stages"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(resp.Body), &st) != nil || st.State != "RUNNING" || len(st.Stages) != 1 || st.Stages[0].Total != 2 {
		t.Fatalf("status as the owner: %d %s, want 200, RUNNING with 2 tasks", resp.StatusCode, resp.Body)
	}
	// Another principal does not see the job, whatever owner header it sends.
	resp = req(http.MethodGet, "/jobs/"+sub.JobID, bob, "", map[string]string{"X-Batchwork-Owner": alice})
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("status as another principal: %d %s, want 404", resp.StatusCode, resp.Body)
	}
	resp = req(http.MethodGet, "/jobs/"+sub.JobID, "", "", map[string]string{"X-Batchwork-Owner": alice})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("status without a principal: %d %s, want 401", resp.StatusCode, resp.Body)
	}

	// A role's sessions are one owner (the role), whatever session name the
	// caller picks; another role is another owner. The SSO session ARN is
	// longer than the old 128-byte bound on owners.
	const etl = "arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_DataPlatformEngineers_0a1b2c3d4e5f6a7b/"
	resp = req(http.MethodPost, "/jobs", etl+"firstname.lastname@example-corp.com", spec, map[string]string{"Idempotency-Key": "k2"})
	if resp.StatusCode != http.StatusCreated || json.Unmarshal([]byte(resp.Body), &sub) != nil {
		t.Fatalf("submit as a role session: %d %s, want 201", resp.StatusCode, resp.Body)
	}
	if resp = req(http.MethodGet, "/jobs/"+sub.JobID, etl+"another.session", "", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("status as another session of the role: %d %s, want 200", resp.StatusCode, resp.Body)
	}
	if resp = req(http.MethodGet, "/jobs/"+sub.JobID, "arn:aws:sts::123456789012:assumed-role/other/firstname.lastname@example-corp.com", "", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("status as a session of another role: %d %s, want 404", resp.StatusCode, resp.Body)
	}
}
