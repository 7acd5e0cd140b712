package sqswire

import (
	"encoding/base64"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/batchwork/batchwork/shared/awswire"
)

// The encoders write every member of the five inputs, in the SDK's order
// and with its rules: a nil pointer, a nil slice or map and a zero number
// are left out, except the VisibilityTimeout of a visibility change,
// which the SDK always writes.

func encode(call *awswire.Call) ([]byte, error) {
	e := &enc{b: make([]byte, 0, 512)}
	switch in := call.Input.(type) {
	case *sqs.SendMessageBatchInput:
		encodeSendMessageBatch(e, in)
	case *sqs.ReceiveMessageInput:
		encodeReceiveMessage(e, in)
	case *sqs.DeleteMessageBatchInput:
		encodeDeleteMessageBatch(e, in)
	case *sqs.ChangeMessageVisibilityInput:
		encodeChangeMessageVisibility(e, in)
	case *sqs.ChangeMessageVisibilityBatchInput:
		encodeChangeMessageVisibilityBatch(e, in)
	default:
		return nil, fmt.Errorf("sqswire: %s with input %T", call.Operation, call.Input)
	}
	return e.b, nil
}

func (e *enc) optStr(k string, v *string) {
	if v != nil {
		e.key(k)
		e.str(*v)
	}
}

func (e *enc) optInt(k string, v int32) {
	if v != 0 {
		e.key(k)
		e.int(int64(v))
	}
}

func (e *enc) strList(k string, l []string) {
	if l == nil {
		return
	}
	e.key(k)
	e.open('[')
	for _, s := range l {
		e.str(s)
	}
	e.close(']')
}

func (e *enc) bytes(b []byte) {
	e.sep()
	e.b = append(e.b, '"')
	e.b = base64.StdEncoding.AppendEncode(e.b, b)
	e.b = append(e.b, '"')
}

// attrValue is a MessageAttributeValue or MessageSystemAttributeValue,
// whose members are the same.
func (e *enc) attrValue(binList [][]byte, bin []byte, dataType *string, strList []string, str *string) {
	e.open('{')
	if binList != nil {
		e.key("BinaryListValues")
		e.open('[')
		for _, b := range binList {
			e.bytes(b)
		}
		e.close(']')
	}
	if bin != nil {
		e.key("BinaryValue")
		e.bytes(bin)
	}
	e.optStr("DataType", dataType)
	e.strList("StringListValues", strList)
	e.optStr("StringValue", str)
	e.close('}')
}

func encodeSendMessageBatch(e *enc, in *sqs.SendMessageBatchInput) {
	e.open('{')
	if in.Entries != nil {
		e.key("Entries")
		e.open('[')
		for i := range in.Entries {
			m := &in.Entries[i]
			e.open('{')
			e.optInt("DelaySeconds", m.DelaySeconds)
			e.optStr("Id", m.Id)
			if m.MessageAttributes != nil {
				e.key("MessageAttributes")
				e.open('{')
				for k, v := range m.MessageAttributes {
					e.anyKey(k)
					e.attrValue(v.BinaryListValues, v.BinaryValue, v.DataType, v.StringListValues, v.StringValue)
				}
				e.close('}')
			}
			e.optStr("MessageBody", m.MessageBody)
			e.optStr("MessageDeduplicationId", m.MessageDeduplicationId)
			e.optStr("MessageGroupId", m.MessageGroupId)
			if m.MessageSystemAttributes != nil {
				e.key("MessageSystemAttributes")
				e.open('{')
				for k, v := range m.MessageSystemAttributes {
					e.anyKey(k)
					e.attrValue(v.BinaryListValues, v.BinaryValue, v.DataType, v.StringListValues, v.StringValue)
				}
				e.close('}')
			}
			e.close('}')
		}
		e.close(']')
	}
	e.optStr("QueueUrl", in.QueueUrl)
	e.close('}')
}

func encodeReceiveMessage(e *enc, in *sqs.ReceiveMessageInput) {
	e.open('{')
	if in.AttributeNames != nil {
		e.key("AttributeNames")
		e.open('[')
		for _, n := range in.AttributeNames {
			e.str(string(n))
		}
		e.close(']')
	}
	e.optInt("MaxNumberOfMessages", in.MaxNumberOfMessages)
	e.strList("MessageAttributeNames", in.MessageAttributeNames)
	if in.MessageSystemAttributeNames != nil {
		e.key("MessageSystemAttributeNames")
		e.open('[')
		for _, n := range in.MessageSystemAttributeNames {
			e.str(string(n))
		}
		e.close(']')
	}
	e.optStr("QueueUrl", in.QueueUrl)
	e.optStr("ReceiveRequestAttemptId", in.ReceiveRequestAttemptId)
	e.optInt("VisibilityTimeout", in.VisibilityTimeout)
	e.optInt("WaitTimeSeconds", in.WaitTimeSeconds)
	e.close('}')
}

func encodeDeleteMessageBatch(e *enc, in *sqs.DeleteMessageBatchInput) {
	e.open('{')
	if in.Entries != nil {
		e.key("Entries")
		e.open('[')
		for i := range in.Entries {
			m := &in.Entries[i]
			e.open('{')
			e.optStr("Id", m.Id)
			e.optStr("ReceiptHandle", m.ReceiptHandle)
			e.close('}')
		}
		e.close(']')
	}
	e.optStr("QueueUrl", in.QueueUrl)
	e.close('}')
}

func encodeChangeMessageVisibility(e *enc, in *sqs.ChangeMessageVisibilityInput) {
	e.open('{')
	e.optStr("QueueUrl", in.QueueUrl)
	e.optStr("ReceiptHandle", in.ReceiptHandle)
	e.key("VisibilityTimeout")
	e.int(int64(in.VisibilityTimeout))
	e.close('}')
}

func encodeChangeMessageVisibilityBatch(e *enc, in *sqs.ChangeMessageVisibilityBatchInput) {
	e.open('{')
	if in.Entries != nil {
		e.key("Entries")
		e.open('[')
		for i := range in.Entries {
			m := &in.Entries[i]
			e.open('{')
			e.optStr("Id", m.Id)
			e.optStr("ReceiptHandle", m.ReceiptHandle)
			e.key("VisibilityTimeout")
			e.int(int64(m.VisibilityTimeout))
			e.close('}')
		}
		e.close(']')
	}
	e.optStr("QueueUrl", in.QueueUrl)
	e.close('}')
}

func decode(op string, body []byte) (any, error) {
	d := &dec{b: body}
	var out any
	switch op {
	case opSend:
		o := &sqs.SendMessageBatchOutput{}
		d.object(func(k []byte) {
			switch string(k) {
			case "Failed":
				o.Failed = d.failed()
			case "Successful":
				o.Successful = d.sent()
			default:
				d.skip()
			}
		})
		out = o
	case opReceive:
		o := &sqs.ReceiveMessageOutput{}
		d.object(func(k []byte) {
			if string(k) == "Messages" {
				o.Messages = d.messages()
			} else {
				d.skip()
			}
		})
		out = o
	case opDelete:
		o := &sqs.DeleteMessageBatchOutput{}
		d.object(func(k []byte) {
			switch string(k) {
			case "Failed":
				o.Failed = d.failed()
			case "Successful":
				o.Successful = listOf(d, func() (r types.DeleteMessageBatchResultEntry) { r.Id = d.id(); return })
			default:
				d.skip()
			}
		})
		out = o
	case opChange:
		// The SDK discards this answer's body unread.
		return &sqs.ChangeMessageVisibilityOutput{}, nil
	case opChangeBatch:
		o := &sqs.ChangeMessageVisibilityBatchOutput{}
		d.object(func(k []byte) {
			switch string(k) {
			case "Failed":
				o.Failed = d.failed()
			case "Successful":
				o.Successful = listOf(d, func() (r types.ChangeMessageVisibilityBatchResultEntry) { r.Id = d.id(); return })
			default:
				d.skip()
			}
		})
		out = o
	}
	d.end()
	if d.err != nil {
		return nil, &smithy.DeserializationError{Err: fmt.Errorf("sqswire: %s response: %w", op, d.err), Snapshot: awswire.Snapshot(body)}
	}
	return out, nil
}

// listOf reads a JSON array (null: nil, [] : empty) of elements el reads.
func listOf[T any](d *dec, el func() T) []T {
	if d.null() {
		return nil
	}
	l := []T{}
	d.array(func() { l = append(l, el()) })
	return l
}

// id reads an object's Id member, for the result entries that have only it.
func (d *dec) id() (id *string) {
	d.object(func(k []byte) {
		if string(k) == "Id" {
			id = d.strPtr()
		} else {
			d.skip()
		}
	})
	return id
}

func (d *dec) failed() []types.BatchResultErrorEntry {
	return listOf(d, func() (r types.BatchResultErrorEntry) {
		d.object(func(k []byte) {
			switch string(k) {
			case "Code":
				r.Code = d.strPtr()
			case "Id":
				r.Id = d.strPtr()
			case "Message":
				r.Message = d.strPtr()
			case "SenderFault":
				r.SenderFault = d.boolean()
			default:
				d.skip()
			}
		})
		return r
	})
}

func (d *dec) sent() []types.SendMessageBatchResultEntry {
	return listOf(d, func() (r types.SendMessageBatchResultEntry) {
		d.object(func(k []byte) {
			switch string(k) {
			case "Id":
				r.Id = d.strPtr()
			case "MD5OfMessageAttributes":
				r.MD5OfMessageAttributes = d.strPtr()
			case "MD5OfMessageBody":
				r.MD5OfMessageBody = d.strPtr()
			case "MD5OfMessageSystemAttributes":
				r.MD5OfMessageSystemAttributes = d.strPtr()
			case "MessageId":
				r.MessageId = d.strPtr()
			case "SequenceNumber":
				r.SequenceNumber = d.strPtr()
			default:
				d.skip()
			}
		})
		return r
	})
}

func (d *dec) messages() []types.Message {
	return listOf(d, func() (m types.Message) {
		d.object(func(k []byte) {
			switch string(k) {
			case "Attributes":
				if d.null() {
					return
				}
				m.Attributes = map[string]string{}
				d.object(func(k []byte) {
					name := string(k)
					m.Attributes[name] = d.str()
				})
			case "Body":
				m.Body = d.strPtr()
			case "MD5OfBody":
				m.MD5OfBody = d.strPtr()
			case "MD5OfMessageAttributes":
				m.MD5OfMessageAttributes = d.strPtr()
			case "MessageAttributes":
				if d.null() {
					return
				}
				m.MessageAttributes = map[string]types.MessageAttributeValue{}
				d.object(func(k []byte) {
					name := string(k)
					m.MessageAttributes[name] = d.attrValue()
				})
			case "MessageId":
				m.MessageId = d.strPtr()
			case "ReceiptHandle":
				m.ReceiptHandle = d.strPtr()
			default:
				d.skip()
			}
		})
		return m
	})
}

func (d *dec) attrValue() (v types.MessageAttributeValue) {
	d.object(func(k []byte) {
		switch string(k) {
		case "BinaryListValues":
			v.BinaryListValues = listOf(d, d.bytes)
		case "BinaryValue":
			v.BinaryValue = d.bytes()
		case "DataType":
			v.DataType = d.strPtr()
		case "StringListValues":
			v.StringListValues = listOf(d, d.str)
		case "StringValue":
			v.StringValue = d.strPtr()
		default:
			d.skip()
		}
	})
	return v
}

// bytes reads a blob: base64, as the SDK's decoder reads it.
func (d *dec) bytes() []byte {
	if d.null() {
		return nil
	}
	s := d.strBytes()
	if d.err != nil {
		return nil
	}
	b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(b, s)
	if err != nil {
		d.fail("invalid base64 blob")
		return nil
	}
	return b[:n]
}
