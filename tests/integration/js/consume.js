// Consume with a kafkajs consumer group and report every record.
// stdin: {brokers, topic, groupId, expected: {partition: count}, seek: {partition: offset} | null,
//         timeoutMs, maxBytes}
// Without `seek` the group starts from the beginning; with it, each listed partition starts at
// the given offset (kafkajs applies a seek at its next fetch, so records below the seek offset that
// a first fetch from the beginning returned are dropped and only counted). Stops once every
// partition has its expected count (or at the timeout).
// stdout: {records: [{partition, offset, key, value, headers: [[name, value]], timestamp}],
//          droppedBeforeSeek}
'use strict'

const { client, toBase64, runScript } = require('./common')

function headerPairs(headers) {
  const pairs = []
  for (const [name, value] of Object.entries(headers || {})) {
    for (const one of Array.isArray(value) ? value : [value]) pairs.push([name, toBase64(one)])
  }
  return pairs
}

runScript(async args => {
  const consumer = client(args).consumer({
    groupId: args.groupId,
    maxBytes: args.maxBytes,
    maxBytesPerPartition: args.maxBytes,
    allowAutoTopicCreation: false,
  })
  await consumer.connect()
  const records = []
  const counts = {}
  let droppedBeforeSeek = 0
  let finish
  const done = new Promise(resolve => {
    finish = resolve
  })
  const complete = () =>
    Object.entries(args.expected).every(([partition, n]) => (counts[partition] || 0) >= n)
  try {
    await consumer.subscribe({ topics: [args.topic], fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        const start = args.seek && args.seek[partition]
        if (start !== undefined && start !== null && BigInt(message.offset) < BigInt(start)) {
          droppedBeforeSeek += 1
          return
        }
        records.push({
          partition,
          offset: message.offset,
          key: toBase64(message.key),
          value: toBase64(message.value),
          headers: headerPairs(message.headers),
          timestamp: message.timestamp,
        })
        counts[partition] = (counts[partition] || 0) + 1
        if (complete()) finish()
      },
    })
    for (const [partition, offset] of Object.entries(args.seek || {})) {
      consumer.seek({ topic: args.topic, partition: Number(partition), offset: String(offset) })
    }
    if (complete()) finish()
    const timer = setTimeout(finish, args.timeoutMs)
    await done
    clearTimeout(timer)
  } finally {
    await consumer.disconnect()
  }
  return { records, droppedBeforeSeek }
})
