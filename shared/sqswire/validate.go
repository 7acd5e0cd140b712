package sqswire

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
)

// validate refuses an input without a member the SDK requires, with the
// SDK's error (its validators.go), before the hooks see the call and
// before anything is sent, as the SDK's validation middleware does.
func validate(in any) error {
	var p smithy.InvalidParamsError
	switch v := in.(type) {
	case *sqs.SendMessageBatchInput:
		p = params("SendMessageBatchInput", required{"QueueUrl", v.QueueUrl == nil}, required{"Entries", v.Entries == nil})
		if v.Entries != nil {
			list := smithy.InvalidParamsError{Context: "SendMessageBatchRequestEntryList"}
			for i := range v.Entries {
				e := &v.Entries[i]
				ep := params("SendMessageBatchRequestEntry", required{"Id", e.Id == nil}, required{"MessageBody", e.MessageBody == nil})
				attrs := smithy.InvalidParamsError{Context: "MessageBodyAttributeMap"}
				for k, a := range e.MessageAttributes {
					nestAt(&attrs, "[%q]", k, params("MessageAttributeValue", required{"DataType", a.DataType == nil}))
				}
				nest(&ep, "MessageAttributes", attrs)
				sys := smithy.InvalidParamsError{Context: "MessageBodySystemAttributeMap"}
				for k, a := range e.MessageSystemAttributes {
					nestAt(&sys, "[%q]", k, params("MessageSystemAttributeValue", required{"DataType", a.DataType == nil}))
				}
				nest(&ep, "MessageSystemAttributes", sys)
				nestAt(&list, "[%d]", i, ep)
			}
			nest(&p, "Entries", list)
		}
	case *sqs.ReceiveMessageInput:
		p = params("ReceiveMessageInput", required{"QueueUrl", v.QueueUrl == nil})
	case *sqs.DeleteMessageBatchInput:
		p = params("DeleteMessageBatchInput", required{"QueueUrl", v.QueueUrl == nil}, required{"Entries", v.Entries == nil})
		list := smithy.InvalidParamsError{Context: "DeleteMessageBatchRequestEntryList"}
		for i, e := range v.Entries {
			nestAt(&list, "[%d]", i, params("DeleteMessageBatchRequestEntry", required{"Id", e.Id == nil}, required{"ReceiptHandle", e.ReceiptHandle == nil}))
		}
		nest(&p, "Entries", list)
	case *sqs.ChangeMessageVisibilityInput:
		p = params("ChangeMessageVisibilityInput", required{"QueueUrl", v.QueueUrl == nil}, required{"ReceiptHandle", v.ReceiptHandle == nil})
	case *sqs.ChangeMessageVisibilityBatchInput:
		p = params("ChangeMessageVisibilityBatchInput", required{"QueueUrl", v.QueueUrl == nil}, required{"Entries", v.Entries == nil})
		list := smithy.InvalidParamsError{Context: "ChangeMessageVisibilityBatchRequestEntryList"}
		for i, e := range v.Entries {
			nestAt(&list, "[%d]", i, params("ChangeMessageVisibilityBatchRequestEntry", required{"Id", e.Id == nil}, required{"ReceiptHandle", e.ReceiptHandle == nil}))
		}
		nest(&p, "Entries", list)
	}
	if p.Len() > 0 {
		return p
	}
	return nil
}

type required struct {
	name    string
	missing bool
}

func params(context string, rs ...required) smithy.InvalidParamsError {
	p := smithy.InvalidParamsError{Context: context}
	for _, r := range rs {
		if r.missing {
			p.Add(smithy.NewErrParamRequired(r.name))
		}
	}
	return p
}

// nestAt is nest under the name format renders from key, rendered only
// for a member with errors: a valid batch's entries cost no formatting.
func nestAt[K any](p *smithy.InvalidParamsError, format string, key K, inner smithy.InvalidParamsError) {
	if inner.Len() > 0 {
		p.AddNested(fmt.Sprintf(format, key), inner)
	}
}

func nest(p *smithy.InvalidParamsError, name string, inner smithy.InvalidParamsError) {
	if inner.Len() > 0 {
		p.AddNested(name, inner)
	}
}
