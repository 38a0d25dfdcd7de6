// Admin operations with kafkajs.
// stdin: {brokers, action: "createTopic", topic, partitions, configs: {name: value}}
//        {brokers, action: "offsetsByTimestamp", topic, timestamp}
//        {brokers, action: "topicOffsets", topic}
//        {brokers, action: "metadata", topic}
'use strict'

const { client, runScript } = require('./common')

runScript(async args => {
  const admin = client(args).admin()
  await admin.connect()
  try {
    switch (args.action) {
      case 'createTopic': {
        const created = await admin.createTopics({
          waitForLeaders: true,
          topics: [
            {
              topic: args.topic,
              numPartitions: args.partitions,
              replicationFactor: 1,
              configEntries: Object.entries(args.configs || {}).map(([name, value]) => ({
                name,
                value,
              })),
            },
          ],
        })
        return { created }
      }
      case 'offsetsByTimestamp':
        return { offsets: await admin.fetchTopicOffsetsByTimestamp(args.topic, args.timestamp) }
      case 'topicOffsets':
        return { offsets: await admin.fetchTopicOffsets(args.topic) }
      case 'metadata':
        return await admin.fetchTopicMetadata({ topics: [args.topic] })
      default:
        throw new Error(`unknown action ${args.action}`)
    }
  } finally {
    await admin.disconnect()
  }
})
