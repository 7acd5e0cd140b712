package provision

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
)

// PauseEventSources disables a deployed stack's SQS event source mappings
// on an emulator, so that locally hosted executors receive the task
// messages. moto runs an enabled mapping inside SendMessage itself: it
// receives a batch and tries to invoke the function in Docker, which
// hides the messages, delays the send and spends their receive count. It
// refuses to touch a stack on AWS (cfg without a base endpoint). Returns
// how many mappings it disabled.
func PauseEventSources(ctx context.Context, cfg aws.Config, stack string) (int, error) {
	if cfg.BaseEndpoint == nil || *cfg.BaseEndpoint == "" {
		return 0, errors.New("pause event sources: only on an emulator (AWS_ENDPOINT_URL)")
	}
	d, err := cloudformation.NewFromConfig(cfg).DescribeStackResources(ctx, &cloudformation.DescribeStackResourcesInput{StackName: &stack})
	if err != nil {
		return 0, fmt.Errorf("stack %s: describe resources: %w", stack, err)
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return 0, fmt.Errorf("pause event sources: credentials: %w", err)
	}
	n := 0
	for _, r := range d.StackResources {
		if aws.ToString(r.ResourceType) != "AWS::Lambda::EventSourceMapping" {
			continue
		}
		// The Lambda API has no client in this module; one signed call.
		body := []byte(`{"Enabled":false}`)
		u := strings.TrimRight(*cfg.BaseEndpoint, "/") + "/2015-03-31/event-source-mappings/" + url.PathEscape(aws.ToString(r.PhysicalResourceId))
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, bytes.NewReader(body))
		if err != nil {
			return n, err
		}
		req.Header.Set("Content-Type", "application/json")
		sum := sha256.Sum256(body)
		if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "lambda", cfg.Region, time.Now()); err != nil {
			return n, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return n, fmt.Errorf("disable event source %s: %w", aws.ToString(r.LogicalResourceId), err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return n, fmt.Errorf("disable event source %s: %s: %s", aws.ToString(r.LogicalResourceId), resp.Status, msg)
		}
		n++
	}
	return n, nil
}
