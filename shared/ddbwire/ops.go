package ddbwire

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The encoders write the members the SDK's serializers write, under the
// same names. The legacy members (AttributesToGet, Expected,
// ConditionalOperator, AttributeUpdates, KeyConditions, QueryFilter) are
// refused: the store writes expressions only, and a member sent nowhere
// would change what the call means.

func unsupported(field string) error {
	return fmt.Errorf("ddbwire: %s is not supported (use the SDK client: BATCHWORK_DYNAMO_CLIENT=sdk)", field)
}

func (e *enc) optStr(k string, v *string) {
	if v != nil {
		e.Key(k)
		e.Str(*v)
	}
}

func (e *enc) optBool(k string, v *bool) {
	if v != nil {
		e.Key(k)
		e.Bool(*v)
	}
}

func (e *enc) enum(k, v string) {
	if v != "" {
		e.Key(k)
		e.Str(v)
	}
}

func (e *enc) names(m map[string]string) {
	if m != nil {
		e.Key("ExpressionAttributeNames")
		e.strMap(m)
	}
}

func (e *enc) optMap(k string, m map[string]types.AttributeValue) error {
	if m == nil {
		return nil
	}
	e.Key(k)
	if err := e.avMap(m); err != nil {
		return fmt.Errorf("%s.%w", k, err)
	}
	return nil
}

func encodeGetItem(e *enc, in *dynamodb.GetItemInput) error {
	if in.AttributesToGet != nil {
		return unsupported("GetItemInput.AttributesToGet")
	}
	e.Open('{')
	e.optBool("ConsistentRead", in.ConsistentRead)
	e.names(in.ExpressionAttributeNames)
	if err := e.optMap("Key", in.Key); err != nil {
		return err
	}
	e.optStr("ProjectionExpression", in.ProjectionExpression)
	e.enum("ReturnConsumedCapacity", string(in.ReturnConsumedCapacity))
	e.optStr("TableName", in.TableName)
	e.Close('}')
	return nil
}

func encodePutItem(e *enc, in *dynamodb.PutItemInput) error {
	switch {
	case in.Expected != nil:
		return unsupported("PutItemInput.Expected")
	case in.ConditionalOperator != "":
		return unsupported("PutItemInput.ConditionalOperator")
	}
	e.Open('{')
	e.optStr("ConditionExpression", in.ConditionExpression)
	e.names(in.ExpressionAttributeNames)
	if err := e.optMap("ExpressionAttributeValues", in.ExpressionAttributeValues); err != nil {
		return err
	}
	if err := e.optMap("Item", in.Item); err != nil {
		return err
	}
	e.enum("ReturnConsumedCapacity", string(in.ReturnConsumedCapacity))
	e.enum("ReturnItemCollectionMetrics", string(in.ReturnItemCollectionMetrics))
	e.enum("ReturnValues", string(in.ReturnValues))
	e.enum("ReturnValuesOnConditionCheckFailure", string(in.ReturnValuesOnConditionCheckFailure))
	e.optStr("TableName", in.TableName)
	e.Close('}')
	return nil
}

func encodeUpdateItem(e *enc, in *dynamodb.UpdateItemInput) error {
	switch {
	case in.AttributeUpdates != nil:
		return unsupported("UpdateItemInput.AttributeUpdates")
	case in.Expected != nil:
		return unsupported("UpdateItemInput.Expected")
	case in.ConditionalOperator != "":
		return unsupported("UpdateItemInput.ConditionalOperator")
	}
	e.Open('{')
	e.optStr("ConditionExpression", in.ConditionExpression)
	e.names(in.ExpressionAttributeNames)
	if err := e.optMap("ExpressionAttributeValues", in.ExpressionAttributeValues); err != nil {
		return err
	}
	if err := e.optMap("Key", in.Key); err != nil {
		return err
	}
	e.enum("ReturnConsumedCapacity", string(in.ReturnConsumedCapacity))
	e.enum("ReturnItemCollectionMetrics", string(in.ReturnItemCollectionMetrics))
	e.enum("ReturnValues", string(in.ReturnValues))
	e.enum("ReturnValuesOnConditionCheckFailure", string(in.ReturnValuesOnConditionCheckFailure))
	e.optStr("TableName", in.TableName)
	e.optStr("UpdateExpression", in.UpdateExpression)
	e.Close('}')
	return nil
}

func encodeQuery(e *enc, in *dynamodb.QueryInput) error {
	switch {
	case in.AttributesToGet != nil:
		return unsupported("QueryInput.AttributesToGet")
	case in.ConditionalOperator != "":
		return unsupported("QueryInput.ConditionalOperator")
	case in.KeyConditions != nil:
		return unsupported("QueryInput.KeyConditions")
	case in.QueryFilter != nil:
		return unsupported("QueryInput.QueryFilter")
	}
	return encodeRead(e, read{
		consistent: in.ConsistentRead, start: in.ExclusiveStartKey, names: in.ExpressionAttributeNames, values: in.ExpressionAttributeValues,
		filter: in.FilterExpression, index: in.IndexName, keyCond: in.KeyConditionExpression, limit: in.Limit, projection: in.ProjectionExpression,
		capacity: string(in.ReturnConsumedCapacity), forward: in.ScanIndexForward, sel: string(in.Select), table: in.TableName,
	})
}

func encodeScan(e *enc, in *dynamodb.ScanInput) error {
	switch {
	case in.AttributesToGet != nil:
		return unsupported("ScanInput.AttributesToGet")
	case in.ConditionalOperator != "":
		return unsupported("ScanInput.ConditionalOperator")
	case in.ScanFilter != nil:
		return unsupported("ScanInput.ScanFilter")
	}
	return encodeRead(e, read{
		consistent: in.ConsistentRead, start: in.ExclusiveStartKey, names: in.ExpressionAttributeNames, values: in.ExpressionAttributeValues,
		filter: in.FilterExpression, index: in.IndexName, limit: in.Limit, projection: in.ProjectionExpression,
		capacity: string(in.ReturnConsumedCapacity), segment: in.Segment, sel: string(in.Select), table: in.TableName, segments: in.TotalSegments,
	})
}

// read is the members a Query and a Scan share, and those of either
// (keyCond and forward: Query; segment and segments: Scan).
type read struct {
	consistent                         *bool
	start, values                      map[string]types.AttributeValue
	names                              map[string]string
	filter, index, keyCond, projection *string
	table                              *string
	limit, segment, segments           *int32
	forward                            *bool
	capacity, sel                      string
}

// encodeRead writes a Query's or a Scan's members in the SDK's order.
func encodeRead(e *enc, r read) error {
	e.Open('{')
	e.optBool("ConsistentRead", r.consistent)
	if err := e.optMap("ExclusiveStartKey", r.start); err != nil {
		return err
	}
	e.names(r.names)
	if err := e.optMap("ExpressionAttributeValues", r.values); err != nil {
		return err
	}
	e.optStr("FilterExpression", r.filter)
	e.optStr("IndexName", r.index)
	e.optStr("KeyConditionExpression", r.keyCond)
	e.optInt("Limit", r.limit)
	e.optStr("ProjectionExpression", r.projection)
	e.enum("ReturnConsumedCapacity", r.capacity)
	e.optBool("ScanIndexForward", r.forward)
	e.optInt("Segment", r.segment)
	e.enum("Select", r.sel)
	e.optStr("TableName", r.table)
	e.optInt("TotalSegments", r.segments)
	e.Close('}')
	return nil
}

// optInt writes an integer member that is set.
func (e *enc) optInt(k string, v *int32) {
	if v != nil {
		e.Key(k)
		e.Int(int64(*v))
	}
}

func encodeBatchGetItem(e *enc, in *dynamodb.BatchGetItemInput) error {
	e.Open('{')
	if in.RequestItems != nil {
		e.Key("RequestItems")
		e.Open('{')
		for table, ka := range in.RequestItems {
			if ka.AttributesToGet != nil {
				return unsupported("BatchGetItemInput.RequestItems[].AttributesToGet")
			}
			e.AnyKey(table)
			e.Open('{')
			e.optBool("ConsistentRead", ka.ConsistentRead)
			e.names(ka.ExpressionAttributeNames)
			if ka.Keys != nil {
				e.Key("Keys")
				e.Open('[')
				for _, k := range ka.Keys {
					if err := e.avMap(k); err != nil {
						return fmt.Errorf("RequestItems.%s.Keys.%w", table, err)
					}
				}
				e.Close(']')
			}
			e.optStr("ProjectionExpression", ka.ProjectionExpression)
			e.Close('}')
		}
		e.Close('}')
	}
	e.enum("ReturnConsumedCapacity", string(in.ReturnConsumedCapacity))
	e.Close('}')
	return nil
}

func encodeTransactWriteItems(e *enc, in *dynamodb.TransactWriteItemsInput, token string) error {
	e.Open('{')
	e.Key("ClientRequestToken")
	e.Str(token)
	e.enum("ReturnConsumedCapacity", string(in.ReturnConsumedCapacity))
	e.enum("ReturnItemCollectionMetrics", string(in.ReturnItemCollectionMetrics))
	if in.TransactItems != nil {
		e.Key("TransactItems")
		e.Open('[')
		for i, it := range in.TransactItems {
			if err := e.transactItem(it); err != nil {
				return fmt.Errorf("TransactItems[%d].%w", i, err)
			}
		}
		e.Close(']')
	}
	e.Close('}')
	return nil
}

func (e *enc) transactItem(it types.TransactWriteItem) error {
	e.Open('{')
	if c := it.ConditionCheck; c != nil {
		e.Key("ConditionCheck")
		if err := e.writeItem(c.ConditionExpression, c.ExpressionAttributeNames, c.ExpressionAttributeValues, nil, c.Key, c.ReturnValuesOnConditionCheckFailure, c.TableName, nil); err != nil {
			return fmt.Errorf("ConditionCheck.%w", err)
		}
	}
	if d := it.Delete; d != nil {
		e.Key("Delete")
		if err := e.writeItem(d.ConditionExpression, d.ExpressionAttributeNames, d.ExpressionAttributeValues, nil, d.Key, d.ReturnValuesOnConditionCheckFailure, d.TableName, nil); err != nil {
			return fmt.Errorf("Delete.%w", err)
		}
	}
	if p := it.Put; p != nil {
		e.Key("Put")
		if err := e.writeItem(p.ConditionExpression, p.ExpressionAttributeNames, p.ExpressionAttributeValues, p.Item, nil, p.ReturnValuesOnConditionCheckFailure, p.TableName, nil); err != nil {
			return fmt.Errorf("Put.%w", err)
		}
	}
	if u := it.Update; u != nil {
		e.Key("Update")
		if err := e.writeItem(u.ConditionExpression, u.ExpressionAttributeNames, u.ExpressionAttributeValues, nil, u.Key, u.ReturnValuesOnConditionCheckFailure, u.TableName, u.UpdateExpression); err != nil {
			return fmt.Errorf("Update.%w", err)
		}
	}
	e.Close('}')
	return nil
}

// writeItem writes one of a transaction's ConditionCheck, Delete, Put and
// Update, whose members are these, in this order.
func (e *enc) writeItem(cond *string, names map[string]string, values, item, key map[string]types.AttributeValue,
	rv types.ReturnValuesOnConditionCheckFailure, table, update *string) error {
	e.Open('{')
	e.optStr("ConditionExpression", cond)
	e.names(names)
	if err := e.optMap("ExpressionAttributeValues", values); err != nil {
		return err
	}
	if err := e.optMap("Item", item); err != nil {
		return err
	}
	if err := e.optMap("Key", key); err != nil {
		return err
	}
	e.enum("ReturnValuesOnConditionCheckFailure", string(rv))
	e.optStr("TableName", table)
	e.optStr("UpdateExpression", update)
	e.Close('}')
	return nil
}

func encodeBatchExecuteStatement(e *enc, in *dynamodb.BatchExecuteStatementInput) error {
	e.Open('{')
	e.enum("ReturnConsumedCapacity", string(in.ReturnConsumedCapacity))
	if in.Statements != nil {
		e.Key("Statements")
		e.Open('[')
		for i, s := range in.Statements {
			e.Open('{')
			e.optBool("ConsistentRead", s.ConsistentRead)
			if s.Parameters != nil {
				e.Key("Parameters")
				if err := e.avList(s.Parameters); err != nil {
					return fmt.Errorf("Statements[%d].Parameters%w", i, err)
				}
			}
			e.enum("ReturnValuesOnConditionCheckFailure", string(s.ReturnValuesOnConditionCheckFailure))
			e.optStr("Statement", s.Statement)
			e.Close('}')
		}
		e.Close(']')
	}
	e.Close('}')
	return nil
}

// The decoders read every member of the outputs; members the SDK does
// not model are skipped, as it skips them.

func (d *dec) capacity() *types.Capacity {
	if d.Null() {
		return nil
	}
	c := &types.Capacity{}
	d.Object(func(k []byte) {
		switch string(k) {
		case "CapacityUnits":
			c.CapacityUnits = d.Float()
		case "ReadCapacityUnits":
			c.ReadCapacityUnits = d.Float()
		case "WriteCapacityUnits":
			c.WriteCapacityUnits = d.Float()
		default:
			d.Skip()
		}
	})
	return c
}

func (d *dec) capacities() map[string]types.Capacity {
	if d.Null() {
		return nil
	}
	m := map[string]types.Capacity{}
	d.Object(func(k []byte) {
		key := string(k)
		if c := d.capacity(); c != nil {
			m[key] = *c
		}
	})
	return m
}

func (d *dec) consumed() *types.ConsumedCapacity {
	if d.Null() {
		return nil
	}
	c := &types.ConsumedCapacity{}
	d.Object(func(k []byte) {
		switch string(k) {
		case "CapacityUnits":
			c.CapacityUnits = d.Float()
		case "GlobalSecondaryIndexes":
			c.GlobalSecondaryIndexes = d.capacities()
		case "LocalSecondaryIndexes":
			c.LocalSecondaryIndexes = d.capacities()
		case "ReadCapacityUnits":
			c.ReadCapacityUnits = d.Float()
		case "Table":
			c.Table = d.capacity()
		case "TableName":
			c.TableName = d.StrPtr()
		case "WriteCapacityUnits":
			c.WriteCapacityUnits = d.Float()
		default:
			d.Skip()
		}
	})
	return c
}

func (d *dec) consumedList() []types.ConsumedCapacity {
	if d.Null() {
		return nil
	}
	l := []types.ConsumedCapacity{}
	d.Array(func() {
		if c := d.consumed(); c != nil {
			l = append(l, *c)
		}
	})
	return l
}

func (d *dec) collectionMetrics() *types.ItemCollectionMetrics {
	if d.Null() {
		return nil
	}
	m := &types.ItemCollectionMetrics{}
	d.Object(func(k []byte) {
		switch string(k) {
		case "ItemCollectionKey":
			m.ItemCollectionKey = d.avMap()
		case "SizeEstimateRangeGB":
			if !d.Null() {
				m.SizeEstimateRangeGB = []float64{}
				d.Array(func() {
					if f := d.Float(); f != nil {
						m.SizeEstimateRangeGB = append(m.SizeEstimateRangeGB, *f)
					}
				})
			}
		default:
			d.Skip()
		}
	})
	return m
}

func decodeGetItem(d *dec) *dynamodb.GetItemOutput {
	out := &dynamodb.GetItemOutput{}
	d.Object(func(k []byte) {
		switch string(k) {
		case "ConsumedCapacity":
			out.ConsumedCapacity = d.consumed()
		case "Item":
			out.Item = d.avMap()
		default:
			d.Skip()
		}
	})
	return out
}

// decodeWrite reads PutItem's and UpdateItem's output, which have the
// same members.
func decodeWrite(d *dec) (attrs map[string]types.AttributeValue, cc *types.ConsumedCapacity, icm *types.ItemCollectionMetrics) {
	d.Object(func(k []byte) {
		switch string(k) {
		case "Attributes":
			attrs = d.avMap()
		case "ConsumedCapacity":
			cc = d.consumed()
		case "ItemCollectionMetrics":
			icm = d.collectionMetrics()
		default:
			d.Skip()
		}
	})
	return attrs, cc, icm
}

func decodeQuery(d *dec) *dynamodb.QueryOutput {
	out := &dynamodb.QueryOutput{}
	d.page(&out.Items, &out.LastEvaluatedKey, &out.Count, &out.ScannedCount, &out.ConsumedCapacity)
	return out
}

func decodeScan(d *dec) *dynamodb.ScanOutput {
	out := &dynamodb.ScanOutput{}
	d.page(&out.Items, &out.LastEvaluatedKey, &out.Count, &out.ScannedCount, &out.ConsumedCapacity)
	return out
}

// page decodes the members a Query's and a Scan's answers share.
func (d *dec) page(items *[]map[string]types.AttributeValue, last *map[string]types.AttributeValue, count, scanned *int32, cc **types.ConsumedCapacity) {
	d.Object(func(k []byte) {
		switch string(k) {
		case "ConsumedCapacity":
			*cc = d.consumed()
		case "Count":
			*count = d.Int32()
		case "Items":
			*items = d.avMaps()
		case "LastEvaluatedKey":
			*last = d.avMap()
		case "ScannedCount":
			*scanned = d.Int32()
		default:
			d.Skip()
		}
	})
}

func decodeBatchGetItem(d *dec) *dynamodb.BatchGetItemOutput {
	out := &dynamodb.BatchGetItemOutput{}
	d.Object(func(k []byte) {
		switch string(k) {
		case "ConsumedCapacity":
			out.ConsumedCapacity = d.consumedList()
		case "Responses":
			if d.Null() {
				return
			}
			out.Responses = map[string][]map[string]types.AttributeValue{}
			d.Object(func(t []byte) {
				table := string(t)
				out.Responses[table] = d.avMaps()
			})
		case "UnprocessedKeys":
			if d.Null() {
				return
			}
			out.UnprocessedKeys = map[string]types.KeysAndAttributes{}
			d.Object(func(t []byte) {
				table := string(t)
				out.UnprocessedKeys[table] = d.keysAndAttributes()
			})
		default:
			d.Skip()
		}
	})
	return out
}

func (d *dec) keysAndAttributes() types.KeysAndAttributes {
	var ka types.KeysAndAttributes
	d.Object(func(k []byte) {
		switch string(k) {
		case "AttributesToGet":
			ka.AttributesToGet = d.strList()
		case "ConsistentRead":
			if !d.Null() {
				b := d.Bool()
				ka.ConsistentRead = &b
			}
		case "ExpressionAttributeNames":
			if d.Null() {
				return
			}
			ka.ExpressionAttributeNames = map[string]string{}
			d.Object(func(n []byte) {
				name := string(n)
				ka.ExpressionAttributeNames[name] = d.Str()
			})
		case "Keys":
			ka.Keys = d.avMaps()
		case "ProjectionExpression":
			ka.ProjectionExpression = d.StrPtr()
		default:
			d.Skip()
		}
	})
	return ka
}

func decodeTransactWriteItems(d *dec) *dynamodb.TransactWriteItemsOutput {
	out := &dynamodb.TransactWriteItemsOutput{}
	d.Object(func(k []byte) {
		switch string(k) {
		case "ConsumedCapacity":
			out.ConsumedCapacity = d.consumedList()
		case "ItemCollectionMetrics":
			if d.Null() {
				return
			}
			out.ItemCollectionMetrics = map[string][]types.ItemCollectionMetrics{}
			d.Object(func(t []byte) {
				table := string(t)
				l := []types.ItemCollectionMetrics{}
				d.Array(func() {
					if m := d.collectionMetrics(); m != nil {
						l = append(l, *m)
					}
				})
				out.ItemCollectionMetrics[table] = l
			})
		default:
			d.Skip()
		}
	})
	return out
}

func decodeBatchExecuteStatement(d *dec) *dynamodb.BatchExecuteStatementOutput {
	out := &dynamodb.BatchExecuteStatementOutput{}
	d.Object(func(k []byte) {
		switch string(k) {
		case "ConsumedCapacity":
			out.ConsumedCapacity = d.consumedList()
		case "Responses":
			if d.Null() {
				return
			}
			out.Responses = []types.BatchStatementResponse{}
			d.Array(func() { out.Responses = append(out.Responses, d.statementResponse()) })
		default:
			d.Skip()
		}
	})
	return out
}

func (d *dec) statementResponse() types.BatchStatementResponse {
	var r types.BatchStatementResponse
	d.Object(func(k []byte) {
		switch string(k) {
		case "Error":
			if d.Null() {
				return
			}
			r.Error = &types.BatchStatementError{}
			d.Object(func(f []byte) {
				switch string(f) {
				case "Code":
					r.Error.Code = types.BatchStatementErrorCodeEnum(d.Str())
				case "Item":
					r.Error.Item = d.avMap()
				case "Message":
					r.Error.Message = d.StrPtr()
				default:
					d.Skip()
				}
			})
		case "Item":
			r.Item = d.avMap()
		case "TableName":
			r.TableName = d.StrPtr()
		default:
			d.Skip()
		}
	})
	return r
}
