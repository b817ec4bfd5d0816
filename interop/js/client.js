'use strict';
// lblab's rsocket-js 0.0.27 interop client: the wire contract of docs/DESIGN.md checked
// with another library than rsocket-py, against a balancer or a server.
//
//   node client.js HOST PORT          every check; one JSON line each, exit 0
//   node client.js HOST PORT dispose  32 requests sent without waiting, {"sent": 32}
//                                     printed, then (when standard input closes, or
//                                     after HOLD_MS) the client closed with them
//                                     outstanding
//
// A line is {"check": name, "ok": bool, "detail": "..."}; tests/e2e/test_interop_clients.py
// reads the verdicts. Every wait is bounded (WAIT_MS; the whole run, RUN_MS).
// rsocket-js 0.0.27 has no fragmentation and no default data MIME, and sends
// METADATA_PUSH without its METADATA flag (which lblab takes: that check is here for it).

const {
  RSocketClient,
  BufferEncoders,
  encodeCompositeMetadata,
  encodeRoute,
  MESSAGE_RSOCKET_ROUTING,
  MESSAGE_RSOCKET_COMPOSITE_METADATA,
} = require('rsocket-core');
const {Flowable} = require('rsocket-flowable');
const RSocketTcpClient = require('rsocket-tcp-client').default;

const WAIT_MS = 10000;
const HOLD_MS = 30000;
const RUN_MS = 50000; // under the test's 60 s, so this deadline is the one that reports
const DISPOSED = 32;
const WORK = '{"work_bytes": 100, "pad": "xx"}';

const [host, portText, mode] = process.argv.slice(2);
const port = Number(portText);

class CheckFailed extends Error {}

function expect(ok, what) {
  if (!ok) throw new CheckFailed(what);
}

function bounded(promise, what) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new CheckFailed(`no answer within ${WAIT_MS / 1000} s: ${what}`)), WAIT_MS);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

function describe(error) {
  if (error && error.source) return `RSocket error 0x${error.source.code.toString(16)}: ${error.source.message}`;
  return String((error && error.message) || error);
}

const payload = (data, metadata) => ({data: Buffer.from(data), metadata});
const routed = (data) => payload(data, encodeCompositeMetadata([[MESSAGE_RSOCKET_ROUTING, encodeRoute('work')]]));
const padded = (bytes) => `{"work_bytes": 100, "pad": "${'x'.repeat(bytes)}"}`;

function serverOf(answer) {
  const text = answer && answer.data ? answer.data.toString() : '';
  let server;
  try {
    server = JSON.parse(text).server;
  } catch (_) {
    // not JSON: said below
  }
  expect(typeof server === 'string', `an answer without "server": ${text.slice(0, 200)}`);
  return server;
}

/** A connected RSocket (SETUP sent), its client, and the connection errors seen. */
async function connect() {
  const errors = [];
  const client = new RSocketClient({
    setup: {
      keepAlive: 10000,
      lifetime: 60000,
      dataMimeType: 'application/json',
      metadataMimeType: MESSAGE_RSOCKET_COMPOSITE_METADATA.string,
    },
    transport: new RSocketTcpClient({host, port}, BufferEncoders),
    errorHandler: (e) => errors.push(describe(e)),
  });
  const socket = await bounded(
    new Promise((resolve, reject) => client.connect().subscribe({onComplete: resolve, onError: reject})),
    'connect',
  ).catch((e) => {
    client.close();
    throw e;
  });
  return {client, socket, errors};
}

/** Run ``check(socket)`` on a fresh connection, then close it. */
async function onNew(check) {
  const {client, socket, errors} = await connect();
  try {
    const detail = await check(socket);
    expect(errors.length === 0, `${detail}; but the connection reported ${errors.join('; ')}`);
    return detail;
  } finally {
    client.close();
  }
}

function requestResponse(socket, request) {
  return bounded(
    new Promise((resolve, reject) => socket.requestResponse(request).subscribe({onComplete: resolve, onError: reject})),
    'request-response',
  );
}

/** Every item of a stream or channel, once it completes. */
function collect(flowable, what) {
  const items = [];
  return bounded(
    new Promise((resolve, reject) =>
      flowable.subscribe({
        onSubscribe: (subscription) => subscription.request(1000),
        onNext: (item) => items.push(serverOf(item)),
        onComplete: () => resolve(items),
        onError: reject,
      }),
    ),
    what,
  );
}

const answer = async (socket, request) => `answered by ${serverOf(await requestResponse(socket, request))}`;

const CHECKS = {
  request_response: (socket) => answer(socket, payload(WORK)),
  request_response_routed: (socket) => answer(socket, routed(WORK)),
  async concurrent_64(socket) {
    const outcomes = await Promise.all(
      Array.from({length: 64}, () =>
        requestResponse(socket, payload(WORK)).then(serverOf, (e) => `error ${describe(e)}`),
      ),
    );
    const counts = {};
    for (const o of outcomes) counts[o] = (counts[o] || 0) + 1;
    const tally = JSON.stringify(counts);
    expect(!outcomes.some((o) => o.startsWith('error ')), `64 sent, answers: ${tally}`);
    return `64 answered: ${tally}`;
  },
  large_1mb: (socket) => answer(socket, payload(padded(1 << 20))),
  async invalid_body(socket) {
    const error = await requestResponse(socket, payload('not json')).then(
      (got) => {
        throw new CheckFailed(`a body that is not JSON was answered: ${got.data}`);
      },
      (e) => e,
    );
    if (error instanceof CheckFailed) throw error; // no answer in time
    expect(error.source && error.source.code === 0x201, `not an APPLICATION_ERROR: ${describe(error)}`);
    const message = error.source.message;
    expect(/json/i.test(message), `the APPLICATION_ERROR does not say the body is not JSON: ${message}`);
    return `APPLICATION_ERROR "${message}", then the connection ${await answer(socket, payload(WORK))}`;
  },
  async request_stream(socket) {
    const request = payload('{"work_bytes": 100, "pad": "xx", "items": 3}');
    const items = await collect(socket.requestStream(request), 'request-stream');
    expect(items.length === 3, `3 items asked, the stream completed after ${JSON.stringify(items)}`);
    return `3 items, then complete: ${JSON.stringify(items)}`;
  },
  async request_channel(socket) {
    const inbound = Flowable.just(payload(WORK), payload(WORK), payload(WORK));
    const items = await collect(socket.requestChannel(inbound), 'request-channel');
    expect(items.length === 3, `3 items in, the channel completed after ${JSON.stringify(items)}`);
    return `3 in, 3 out, then complete: ${JSON.stringify(items)}`;
  },
  async fire_and_forget(socket) {
    socket.fireAndForget(payload(WORK));
    return `sent; then the connection ${await answer(socket, payload(WORK))}`;
  },
  async metadata_push(socket) {
    const metadata = encodeCompositeMetadata([[MESSAGE_RSOCKET_ROUTING, encodeRoute('work')]]);
    await bounded(
      new Promise((resolve, reject) => socket.metadataPush({metadata}).subscribe({onComplete: resolve, onError: reject})),
      'metadata-push',
    );
    return `sent (no METADATA flag); then the connection ${await answer(socket, payload(WORK))}`;
  },
};

function report(check, ok, detail) {
  process.stdout.write(JSON.stringify({check, ok, detail}) + '\n');
}

async function runChecks() {
  for (const [name, check] of Object.entries(CHECKS)) {
    try {
      report(name, true, await onNew(check));
    } catch (e) {
      report(name, false, e instanceof CheckFailed ? e.message : describe(e));
    }
  }
}

async function dispose() {
  const {client, socket} = await connect();
  for (let i = 0; i < DISPOSED; i++) {
    socket.requestResponse(payload(WORK)).subscribe({onComplete: () => {}, onError: () => {}});
  }
  process.stdout.write(JSON.stringify({sent: DISPOSED}) + '\n');
  await new Promise((resolve) => {
    const timer = setTimeout(resolve, HOLD_MS);
    process.stdin.on('end', () => {
      clearTimeout(timer);
      resolve();
    });
    process.stdin.resume();
  });
  client.close();
}

const run = setTimeout(() => {
  report('run', false, `the client did not finish within ${RUN_MS / 1000} s`);
  process.exit(1);
}, RUN_MS);
(mode === 'dispose' ? dispose() : runChecks())
  .then(() => {
    clearTimeout(run);
    process.exit(0); // sockets the library keeps open would keep node up
  })
  .catch((e) => {
    report('run', false, describe(e));
    process.exit(1);
  });
