// Produce records with kafkajs and report where each one landed.
// stdin: {brokers, topic, codec, maxBytes, records: [{key, value, headers: [[name, value]],
//         partition (null: kafkajs's default partitioner), timestamp}]}
// stdout: {placed: [{partition, offset}]} in record order.
//
// Records go out in their input order. A run of records with explicit partitions is one send
// (kafkajs groups it into one batch per partition, so each record's offset is its partition's base
// offset plus its index there); a record left to the default partitioner is sent on its own, so
// that the partition it chose is known.
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
  const sendRun = async run => {
    const results = await producer.send({
      topic: args.topic,
      compression,
      acks: -1,
      messages: run.map(([record]) => message(record)),
    })
    const base = {}
    for (const result of results) {
      if (result.errorCode !== 0) throw new Error(`partition ${result.partition}: ${result.errorCode}`)
      base[result.partition] = BigInt(result.baseOffset)
    }
    const seen = {}
    for (const [record, index] of run) {
      const partition = record.partition === null ? results[0].partition : record.partition
      const nth = seen[partition] || 0
      seen[partition] = nth + 1
      placed[index] = { partition, offset: String(base[partition] + BigInt(nth)) }
    }
  }
  try {
    let run = []
    for (const [index, record] of args.records.entries()) {
      if (record.partition !== null) {
        run.push([record, index])
        continue
      }
      if (run.length > 0) await sendRun(run)
      run = []
      await sendRun([[record, index]])
    }
    if (run.length > 0) await sendRun(run)
  } finally {
    await producer.disconnect()
  }
  return { placed }
})
