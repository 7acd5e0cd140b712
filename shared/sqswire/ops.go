package sqswire

import (
	"encoding/base64"
	"fmt"
	"github.com/batchwork/batchwork/shared/awswire/wirejson"

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
	e := &enc{wirejson.Enc{B: make([]byte, 0, 512)}}
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
	return e.B, nil
}

func (e *enc) optStr(k string, v *string) {
	if v != nil {
		e.Key(k)
		e.Str(*v)
	}
}

func (e *enc) optInt(k string, v int32) {
	if v != 0 {
		e.Key(k)
		e.Int(int64(v))
	}
}

func (e *enc) strList(k string, l []string) {
	if l == nil {
		return
	}
	e.Key(k)
	e.Open('[')
	for _, s := range l {
		e.Str(s)
	}
	e.Close(']')
}

func (e *enc) bytes(b []byte) {
	e.Sep()
	e.B = append(e.B, '"')
	e.B = base64.StdEncoding.AppendEncode(e.B, b)
	e.B = append(e.B, '"')
}

// attrValue is a MessageAttributeValue or MessageSystemAttributeValue,
// whose members are the same.
func (e *enc) attrValue(binList [][]byte, bin []byte, dataType *string, strList []string, str *string) {
	e.Open('{')
	if binList != nil {
		e.Key("BinaryListValues")
		e.Open('[')
		for _, b := range binList {
			e.bytes(b)
		}
		e.Close(']')
	}
	if bin != nil {
		e.Key("BinaryValue")
		e.bytes(bin)
	}
	e.optStr("DataType", dataType)
	e.strList("StringListValues", strList)
	e.optStr("StringValue", str)
	e.Close('}')
}

func encodeSendMessageBatch(e *enc, in *sqs.SendMessageBatchInput) {
	e.Open('{')
	if in.Entries != nil {
		e.Key("Entries")
		e.Open('[')
		for i := range in.Entries {
			m := &in.Entries[i]
			e.Open('{')
			e.optInt("DelaySeconds", m.DelaySeconds)
			e.optStr("Id", m.Id)
			if m.MessageAttributes != nil {
				e.Key("MessageAttributes")
				e.Open('{')
				for k, v := range m.MessageAttributes {
					e.AnyKey(k)
					e.attrValue(v.BinaryListValues, v.BinaryValue, v.DataType, v.StringListValues, v.StringValue)
				}
				e.Close('}')
			}
			e.optStr("MessageBody", m.MessageBody)
			e.optStr("MessageDeduplicationId", m.MessageDeduplicationId)
			e.optStr("MessageGroupId", m.MessageGroupId)
			if m.MessageSystemAttributes != nil {
				e.Key("MessageSystemAttributes")
				e.Open('{')
				for k, v := range m.MessageSystemAttributes {
					e.AnyKey(k)
					e.attrValue(v.BinaryListValues, v.BinaryValue, v.DataType, v.StringListValues, v.StringValue)
				}
				e.Close('}')
			}
			e.Close('}')
		}
		e.Close(']')
	}
	e.optStr("QueueUrl", in.QueueUrl)
	e.Close('}')
}

func encodeReceiveMessage(e *enc, in *sqs.ReceiveMessageInput) {
	e.Open('{')
	if in.AttributeNames != nil {
		e.Key("AttributeNames")
		e.Open('[')
		for _, n := range in.AttributeNames {
			e.Str(string(n))
		}
		e.Close(']')
	}
	e.optInt("MaxNumberOfMessages", in.MaxNumberOfMessages)
	e.strList("MessageAttributeNames", in.MessageAttributeNames)
	if in.MessageSystemAttributeNames != nil {
		e.Key("MessageSystemAttributeNames")
		e.Open('[')
		for _, n := range in.MessageSystemAttributeNames {
			e.Str(string(n))
		}
		e.Close(']')
	}
	e.optStr("QueueUrl", in.QueueUrl)
	e.optStr("ReceiveRequestAttemptId", in.ReceiveRequestAttemptId)
	e.optInt("VisibilityTimeout", in.VisibilityTimeout)
	e.optInt("WaitTimeSeconds", in.WaitTimeSeconds)
	e.Close('}')
}

func encodeDeleteMessageBatch(e *enc, in *sqs.DeleteMessageBatchInput) {
	e.Open('{')
	if in.Entries != nil {
		e.Key("Entries")
		e.Open('[')
		for i := range in.Entries {
			m := &in.Entries[i]
			e.Open('{')
			e.optStr("Id", m.Id)
			e.optStr("ReceiptHandle", m.ReceiptHandle)
			e.Close('}')
		}
		e.Close(']')
	}
	e.optStr("QueueUrl", in.QueueUrl)
	e.Close('}')
}

func encodeChangeMessageVisibility(e *enc, in *sqs.ChangeMessageVisibilityInput) {
	e.Open('{')
	e.optStr("QueueUrl", in.QueueUrl)
	e.optStr("ReceiptHandle", in.ReceiptHandle)
	e.Key("VisibilityTimeout")
	e.Int(int64(in.VisibilityTimeout))
	e.Close('}')
}

func encodeChangeMessageVisibilityBatch(e *enc, in *sqs.ChangeMessageVisibilityBatchInput) {
	e.Open('{')
	if in.Entries != nil {
		e.Key("Entries")
		e.Open('[')
		for i := range in.Entries {
			m := &in.Entries[i]
			e.Open('{')
			e.optStr("Id", m.Id)
			e.optStr("ReceiptHandle", m.ReceiptHandle)
			e.Key("VisibilityTimeout")
			e.Int(int64(m.VisibilityTimeout))
			e.Close('}')
		}
		e.Close(']')
	}
	e.optStr("QueueUrl", in.QueueUrl)
	e.Close('}')
}

func decode(op string, body []byte) (any, error) {
	d := &dec{wirejson.Dec{B: body}}
	var out any
	switch op {
	case opSend:
		o := &sqs.SendMessageBatchOutput{}
		d.Object(func(k []byte) {
			switch string(k) {
			case "Failed":
				o.Failed = d.failed()
			case "Successful":
				o.Successful = d.sent()
			default:
				d.Skip()
			}
		})
		out = o
	case opReceive:
		o := &sqs.ReceiveMessageOutput{}
		d.Object(func(k []byte) {
			if string(k) == "Messages" {
				o.Messages = d.messages()
			} else {
				d.Skip()
			}
		})
		out = o
	case opDelete:
		o := &sqs.DeleteMessageBatchOutput{}
		d.Object(func(k []byte) {
			switch string(k) {
			case "Failed":
				o.Failed = d.failed()
			case "Successful":
				o.Successful = listOf(d, func() (r types.DeleteMessageBatchResultEntry) { r.Id = d.id(); return })
			default:
				d.Skip()
			}
		})
		out = o
	case opChange:
		// The SDK discards this answer's body unread.
		return &sqs.ChangeMessageVisibilityOutput{}, nil
	case opChangeBatch:
		o := &sqs.ChangeMessageVisibilityBatchOutput{}
		d.Object(func(k []byte) {
			switch string(k) {
			case "Failed":
				o.Failed = d.failed()
			case "Successful":
				o.Successful = listOf(d, func() (r types.ChangeMessageVisibilityBatchResultEntry) { r.Id = d.id(); return })
			default:
				d.Skip()
			}
		})
		out = o
	}
	d.End()
	if d.Err != nil {
		return nil, &smithy.DeserializationError{Err: fmt.Errorf("sqswire: %s response: %w", op, d.Err), Snapshot: awswire.Snapshot(body)}
	}
	return out, nil
}

// listOf reads a JSON array (null: nil, [] : empty) of elements el reads.
func listOf[T any](d *dec, el func() T) []T {
	if d.Null() {
		return nil
	}
	l := []T{}
	d.Array(func() { l = append(l, el()) })
	return l
}

// id reads an object's Id member, for the result entries that have only it.
func (d *dec) id() (id *string) {
	d.Object(func(k []byte) {
		if string(k) == "Id" {
			id = d.StrPtr()
		} else {
			d.Skip()
		}
	})
	return id
}

func (d *dec) failed() []types.BatchResultErrorEntry {
	return listOf(d, func() (r types.BatchResultErrorEntry) {
		d.Object(func(k []byte) {
			switch string(k) {
			case "Code":
				r.Code = d.StrPtr()
			case "Id":
				r.Id = d.StrPtr()
			case "Message":
				r.Message = d.StrPtr()
			case "SenderFault":
				r.SenderFault = d.Bool()
			default:
				d.Skip()
			}
		})
		return r
	})
}

func (d *dec) sent() []types.SendMessageBatchResultEntry {
	return listOf(d, func() (r types.SendMessageBatchResultEntry) {
		d.Object(func(k []byte) {
			switch string(k) {
			case "Id":
				r.Id = d.StrPtr()
			case "MD5OfMessageAttributes":
				r.MD5OfMessageAttributes = d.StrPtr()
			case "MD5OfMessageBody":
				r.MD5OfMessageBody = d.StrPtr()
			case "MD5OfMessageSystemAttributes":
				r.MD5OfMessageSystemAttributes = d.StrPtr()
			case "MessageId":
				r.MessageId = d.StrPtr()
			case "SequenceNumber":
				r.SequenceNumber = d.StrPtr()
			default:
				d.Skip()
			}
		})
		return r
	})
}

func (d *dec) messages() []types.Message {
	return listOf(d, func() (m types.Message) {
		d.Object(func(k []byte) {
			switch string(k) {
			case "Attributes":
				if d.Null() {
					return
				}
				m.Attributes = map[string]string{}
				d.Object(func(k []byte) {
					name := string(k)
					m.Attributes[name] = d.Str()
				})
			case "Body":
				m.Body = d.StrPtr()
			case "MD5OfBody":
				m.MD5OfBody = d.StrPtr()
			case "MD5OfMessageAttributes":
				m.MD5OfMessageAttributes = d.StrPtr()
			case "MessageAttributes":
				if d.Null() {
					return
				}
				m.MessageAttributes = map[string]types.MessageAttributeValue{}
				d.Object(func(k []byte) {
					name := string(k)
					m.MessageAttributes[name] = d.attrValue()
				})
			case "MessageId":
				m.MessageId = d.StrPtr()
			case "ReceiptHandle":
				m.ReceiptHandle = d.StrPtr()
			default:
				d.Skip()
			}
		})
		return m
	})
}

func (d *dec) attrValue() (v types.MessageAttributeValue) {
	d.Object(func(k []byte) {
		switch string(k) {
		case "BinaryListValues":
			v.BinaryListValues = listOf(d, d.bytes)
		case "BinaryValue":
			v.BinaryValue = d.bytes()
		case "DataType":
			v.DataType = d.StrPtr()
		case "StringListValues":
			v.StringListValues = listOf(d, d.Str)
		case "StringValue":
			v.StringValue = d.StrPtr()
		default:
			d.Skip()
		}
	})
	return v
}

// bytes reads a blob: base64, as the SDK's decoder reads it.
func (d *dec) bytes() []byte {
	if d.Null() {
		return nil
	}
	s := d.StrBytes()
	if d.Err != nil {
		return nil
	}
	b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(b, s)
	if err != nil {
		d.Fail("invalid base64 blob")
		return nil
	}
	return b[:n]
}
