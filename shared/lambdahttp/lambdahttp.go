// Package lambdahttp serves an http.Handler behind API Gateway HTTP APIs
// (payload format 2.0), so the API Lambda runs the same handler as the
// local runner.
package lambdahttp

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/batchwork/batchwork/shared/principal"
)

// OwnerHeader is set from the IAM principal API Gateway authenticated,
// mapped to its owner (see package principal); PrincipalHeader carries the
// principal itself, for audit. Any value the client sent for either is
// removed.
const (
	OwnerHeader     = "X-Batchwork-Owner"
	PrincipalHeader = principal.Header
)

// Adapt returns a Lambda handler serving h, with owners mapped by mode.
func Adapt(h http.Handler, mode principal.Mode) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		body := ev.Body
		if ev.IsBase64Encoded {
			b, err := base64.StdEncoding.DecodeString(body)
			if err != nil {
				return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusBadRequest, Body: `{"code":"invalid_request","message":"body is not valid base64"}`}, nil
			}
			body = string(b)
		}
		u := &url.URL{Path: ev.RawPath, RawQuery: ev.RawQueryString}
		req, err := http.NewRequestWithContext(ctx, ev.RequestContext.HTTP.Method, u.String(), strings.NewReader(body))
		if err != nil {
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusBadRequest}, nil
		}
		for k, v := range ev.Headers {
			req.Header.Set(k, v)
		}
		req.Header.Del(OwnerHeader)
		req.Header.Del(PrincipalHeader)
		if iam := ev.RequestContext.Authorizer; iam != nil && iam.IAM != nil && iam.IAM.UserARN != "" {
			req.Header.Set(OwnerHeader, principal.Owner(iam.IAM.UserARN, mode))
			req.Header.Set(PrincipalHeader, iam.IAM.UserARN)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		headers := map[string]string{}
		for k := range rec.Header() {
			headers[k] = rec.Header().Get(k)
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: rec.Code, Headers: headers, Body: rec.Body.String()}, nil
	}
}
