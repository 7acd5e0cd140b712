package lambdatask

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// Invoker invokes a Lambda function synchronously and returns its
// response payload and, when the function failed, Lambda's FunctionError
// ("Unhandled", "Handled"; the payload then describes the error).
type Invoker interface {
	Invoke(ctx context.Context, function string, payload []byte) (response []byte, functionError string, err error)
}

// SDKInvoker invokes functions with the AWS SDK.
type SDKInvoker struct{ Client *lambda.Client }

// NewInvoker returns an invoker on cfg.
func NewInvoker(cfg aws.Config) SDKInvoker {
	return SDKInvoker{Client: lambda.NewFromConfig(cfg)}
}

// Invoke implements Invoker.
func (s SDKInvoker) Invoke(ctx context.Context, function string, payload []byte) ([]byte, string, error) {
	out, err := s.Client.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(function),
		InvocationType: lambdatypes.InvocationTypeRequestResponse,
		Payload:        payload,
	})
	if err != nil {
		return nil, "", err
	}
	return out.Payload, aws.ToString(out.FunctionError), nil
}
