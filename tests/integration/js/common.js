// Shared by the kafkajs scripts: codec registration, the client, JSON in and out.
//
// Each script reads one JSON object from stdin and prints one JSON object on stdout. Bytes travel
// as base64 strings; null stays null. Failures print {"error": ...} and exit 1.
'use strict'

const { Kafka, logLevel, CompressionTypes, CompressionCodecs } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const lz4 = require('lz4js')
const xxh32 = require('lz4js/xxh32')
const { ZstdCodec } = require('zstd-codec')

// LZ4 frames as Kafka expects them: lz4js writes one 4 MiB block per frame for our batch sizes,
// so the blocks are independent; say so in the frame descriptor and fix its checksum.
function lz4Compress(data) {
  const frame = Buffer.from(lz4.compress(data))
  const BLOCK_INDEPENDENCE = 0x20
  frame[4] |= BLOCK_INDEPENDENCE
  frame[6] = (xxh32.hash(0, frame, 4, 2) >> 8) & 0xff
  return frame
}

const zstd = new Promise(resolve => ZstdCodec.run(binding => resolve(binding)))

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  async compress(encoder) {
    return lz4Compress(encoder.buffer)
  },
  async decompress(buffer) {
    return Buffer.from(lz4.decompress(buffer))
  },
})
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  async compress(encoder) {
    const binding = await zstd
    return Buffer.from(new binding.Simple().compress(encoder.buffer, 3))
  },
  async decompress(buffer) {
    const binding = await zstd
    return Buffer.from(new binding.Streaming().decompress(buffer))
  },
})

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}

// args.ssl (optional): {ca, cert, key} PEM file paths, for an SSL listener.
function tls(options) {
  if (!options) return undefined
  const fs = require('fs')
  const read = path => (path ? fs.readFileSync(path, 'utf8') : undefined)
  return { ca: [read(options.ca)], cert: read(options.cert), key: read(options.key) }
}

function client(args) {
  return new Kafka({
    clientId: 'moldau-kafkajs-test',
    brokers: [args.brokers],
    ssl: tls(args.ssl),
    // args.sasl (optional): {mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512', username, password}
    sasl: args.sasl || undefined,
    logLevel: logLevel.ERROR,
    retry: { retries: args.retries === undefined ? 5 : args.retries, initialRetryTime: 100 },
  })
}

const toBuffer = b64 => (b64 === null || b64 === undefined ? null : Buffer.from(b64, 'base64'))
const toBase64 = buffer => (buffer === null || buffer === undefined ? null : buffer.toString('base64'))

async function readStdin() {
  const chunks = []
  for await (const chunk of process.stdin) chunks.push(chunk)
  return JSON.parse(Buffer.concat(chunks).toString('utf8'))
}

// Run main(args) with the JSON from stdin; print its result (or the error) as JSON.
function runScript(main) {
  readStdin()
    .then(main)
    .then(result => {
      // Exit only once the (possibly large) output is flushed to the pipe.
      process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(0))
    })
    .catch(error => {
      const detail = { error: String(error && error.message), type: error && error.type }
      if (error && error.name) detail.name = error.name
      process.stdout.write(JSON.stringify(detail) + '\n', () => process.exit(1))
    })
}

module.exports = { CODECS, client, toBuffer, toBase64, runScript }
