package sqswire

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// The SDK's message checksum validation (sqs/cust_checksum_validation.go),
// on by default: the MD5 of each body SendMessageBatch sent against the
// one SQS answered, and of each body ReceiveMessage got against the one
// it came with. Like the SDK's, it runs after the hooks and the retries
// (an Initialize middleware added Before), and a mismatch fails the call
// without a retry. The SDK checks no attribute's MD5 (MD5OfMessageAttributes),
// nor does this.

func checkSent(input, output any) error {
	in, out := input.(*sqs.SendMessageBatchInput), output.(*sqs.SendMessageBatchOutput)
	byID := make(map[string]int, len(out.Successful))
	for i, e := range out.Successful {
		byID[aws.ToString(e.Id)] = i
	}
	var bad []checksumError
	for _, e := range in.Entries {
		i, ok := byID[aws.ToString(e.Id)]
		if !ok || e.MessageBody == nil || out.Successful[i].MD5OfMessageBody == nil {
			continue
		}
		if err := checkMD5(*e.MessageBody, *out.Successful[i].MD5OfMessageBody); err != nil {
			bad = append(bad, checksumError{id: aws.ToString(out.Successful[i].MessageId), err: err})
		}
	}
	return checksumErrors(bad)
}

func checkReceived(_, output any) error {
	var bad []checksumError
	for _, m := range output.(*sqs.ReceiveMessageOutput).Messages {
		if m.Body == nil || m.MD5OfBody == nil {
			continue
		}
		if err := checkMD5(*m.Body, *m.MD5OfBody); err != nil {
			bad = append(bad, checksumError{id: aws.ToString(m.MessageId), err: err})
		}
	}
	return checksumErrors(bad)
}

func checkMD5(body, want string) error {
	sum := md5.Sum([]byte(body))
	if got := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("expected MD5 checksum %s, got %s", want, got)
	}
	return nil
}

// checksumError and batchChecksumError say what the SDK's say.
type checksumError struct {
	id  string
	err error
}

func (e checksumError) Error() string {
	prefix := "message"
	if e.id != "" {
		prefix += " " + e.id
	}
	return fmt.Sprintf("%s has invalid checksum, %v", prefix, e.err.Error())
}

// BatchChecksumError is a call's failed MD5 checks, one per message.
type BatchChecksumError struct{ errs []checksumError }

func (e *BatchChecksumError) Error() string {
	var w strings.Builder
	w.WriteString("message checksum errors")
	for _, err := range e.errs {
		fmt.Fprintf(&w, "\n\t%s", err.Error())
	}
	return w.String()
}

func checksumErrors(bad []checksumError) error {
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("message checksum validation failed, %w", &BatchChecksumError{errs: bad})
}
