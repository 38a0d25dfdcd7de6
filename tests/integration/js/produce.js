// Produce records with kafkajs and report where each one landed.
// stdin: {brokers, topic, codec, maxBytes, records: [{key, value, headers: [[name, value]],
//         partition (null: kafkajs's default partitioner), timestamp}]}
// stdout: {placed: [{partition, offset}]} in record order.
//
// Records with an explicit partition go out in one send (kafkajs groups them into one batch per
// partition, so each record's offset is its partition's base offset plus its index there); the
// others are sent one by one so that the partition the default partitioner chose is known.
'use strict'

const { CODECS, client, toBuffer, runScript } = require('./common')

function message(record) {
  const headers = {}
  for (const [name, value] of record.headers) headers[name] = toBuffer(value)
  const built = {
    key: toBuffer(record.key),
    value: toBuffer(record.value),
    headers,
    timestamp: String(record.timestamp),
  }
  if (record.partition !== null) built.partition = record.partition
  return built
}

runScript(async args => {
  const producer = client(args).producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const compression = CODECS[args.codec]
  const placed = new Array(args.records.length)
  try {
    const explicit = args.records.map((r, i) => [r, i]).filter(([r]) => r.partition !== null)
    if (explicit.length > 0) {
      const results = await producer.send({
        topic: args.topic,
        compression,
        acks: -1,
        messages: explicit.map(([r]) => message(r)),
      })
      const base = {}
      for (const result of results) {
        if (result.errorCode !== 0) throw new Error(`partition ${result.partition}: ${result.errorCode}`)
        base[result.partition] = BigInt(result.baseOffset)
      }
      const seen = {}
      for (const [record, index] of explicit) {
        const nth = seen[record.partition] || 0
        seen[record.partition] = nth + 1
        placed[index] = { partition: record.partition, offset: String(base[record.partition] + BigInt(nth)) }
      }
    }
    for (const [index, record] of args.records.entries()) {
      if (record.partition !== null) continue
      const [result] = await producer.send({
        topic: args.topic,
        compression,
        acks: -1,
        messages: [message(record)],
      })
      placed[index] = { partition: result.partition, offset: String(result.baseOffset) }
    }
  } finally {
    await producer.disconnect()
  }
  return { placed }
})
