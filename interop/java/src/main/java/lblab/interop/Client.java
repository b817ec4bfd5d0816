package lblab.interop;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.CompositeByteBuf;
import io.rsocket.Payload;
import io.rsocket.RSocket;
import io.rsocket.core.RSocketConnector;
import io.rsocket.core.Resume;
import io.rsocket.exceptions.ApplicationErrorException;
import io.rsocket.exceptions.SetupException;
import io.rsocket.metadata.CompositeMetadataCodec;
import io.rsocket.metadata.TaggingMetadataCodec;
import io.rsocket.metadata.WellKnownMimeType;
import io.rsocket.transport.netty.client.TcpClientTransport;
import io.rsocket.util.DefaultPayload;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * lblab's rsocket-java 1.1.5 interop client: the wire contract of docs/DESIGN.md checked with
 * another library than rsocket-py, against a balancer or a server.
 *
 * <p>{@code Client HOST PORT} runs every check, prints one JSON line per check ({@code {"check":
 * name, "ok": bool, "detail": "..."}}) and exits 0: the verdicts are the lines, read by
 * tests/e2e/test_interop_clients.py. {@code Client HOST PORT dispose} sends {@value #DISPOSED}
 * requests without waiting, prints {@code {"sent": 32}}, waits for standard input to close (at
 * most {@code HOLD}) and disposes the connection with them outstanding. Every wait is bounded.
 */
public final class Client {
  static final Duration WAIT = Duration.ofSeconds(10);
  static final Duration HOLD = Duration.ofSeconds(30);
  static final int DISPOSED = 32;
  static final String WORK = "{\"work_bytes\": 100, \"pad\": \"xx\"}";
  static final String JSON = "application/json";
  static final String COMPOSITE = WellKnownMimeType.MESSAGE_RSOCKET_COMPOSITE_METADATA.getString();
  static final Pattern SERVER = Pattern.compile("\"server\"\\s*:\\s*\"([^\"]+)\"");

  /** One check: returns what it saw, or throws {@link AssertionError} (or the library's error). */
  interface Body {
    String run() throws Exception;
  }

  record Check(String name, Body body) {}

  static String host;
  static int port;

  public static void main(String[] args) throws Exception {
    host = args[0];
    port = Integer.parseInt(args[1]);
    if (args.length > 2 && args[2].equals("dispose")) {
      dispose();
    } else {
      for (Check c : CHECKS) {
        report(c);
      }
    }
    System.exit(0); // netty's threads would keep the JVM up
  }

  static final List<Check> CHECKS =
      List.of(
          new Check("request_response", () -> onNew(base(), rs -> answer(rs, payload(WORK)))),
          new Check(
              "request_response_routed", () -> onNew(base(), rs -> answer(rs, routed(WORK)))),
          new Check("concurrent_64", () -> onNew(base(), rs -> concurrent(rs, 64))),
          new Check("large_1mb", () -> onNew(base(), rs -> answer(rs, payload(padded(1 << 20))))),
          new Check(
              "large_1mb_mtu_64",
              () -> onNew(base().fragment(64), rs -> answer(rs, payload(padded(1 << 20))))),
          new Check("invalid_body", () -> onNew(base(), Client::invalidBody)),
          new Check("request_stream", () -> onNew(base(), Client::stream)),
          new Check("request_channel", () -> onNew(base(), Client::channel)),
          new Check("fire_and_forget", () -> onNew(base(), Client::fireAndForget)),
          new Check("metadata_push", () -> onNew(base(), Client::metadataPush)),
          new Check(
              "default_data_mime",
              // RSocketConnector's defaults: data application/binary, composite metadata
              () -> onNew(RSocketConnector.create(), rs -> answer(rs, payload(WORK)))),
          new Check("resume_rejected", Client::resumeRejected));

  // ------------------------------------------------------------------ checks

  interface OnConnection {
    String run(RSocket rs) throws Exception;
  }

  static RSocketConnector base() {
    return RSocketConnector.create().dataMimeType(JSON).metadataMimeType(COMPOSITE);
  }

  /** Run {@code check} on a fresh connection made with {@code connector}, then dispose it. */
  static String onNew(RSocketConnector connector, OnConnection check) throws Exception {
    RSocket rs = connector.connect(TcpClientTransport.create(host, port)).block(WAIT);
    try {
      return check.run(rs);
    } finally {
      rs.dispose();
    }
  }

  /** One request-response whose answer names the server that did the work. */
  static String answer(RSocket rs, Payload request) {
    return "answered by " + serverOf(data(rs.requestResponse(request).block(WAIT)));
  }

  static String concurrent(RSocket rs, int n) {
    List<String> outcomes =
        Flux.range(0, n)
            .flatMap(
                i ->
                    rs.requestResponse(payload(WORK))
                        .map(p -> serverOf(data(p)))
                        .onErrorResume(e -> Mono.just("error " + describe(e))),
                n)
            .collectList()
            .block(WAIT);
    Map<String, Integer> counts = new TreeMap<>();
    outcomes.forEach(o -> counts.merge(o, 1, Integer::sum));
    expect(
        outcomes.size() == n && counts.keySet().stream().noneMatch(k -> k.startsWith("error ")),
        n + " sent, answers: " + counts);
    return n + " answered: " + counts;
  }

  static String invalidBody(RSocket rs) {
    String message;
    try {
      Payload p = rs.requestResponse(payload("not json")).block(WAIT);
      throw new AssertionError("a body that is not JSON was answered: " + data(p));
    } catch (ApplicationErrorException e) {
      message = e.getMessage();
    }
    expect(
        message != null && message.toLowerCase().contains("json"),
        "the APPLICATION_ERROR does not say the body is not JSON: " + message);
    return "APPLICATION_ERROR \"" + message + "\", then the connection " + answer(rs, payload(WORK));
  }

  static String stream(RSocket rs) {
    List<String> items =
        rs.requestStream(payload("{\"work_bytes\": 100, \"pad\": \"xx\", \"items\": 3}"))
            .map(p -> serverOf(data(p)))
            .collectList()
            .block(WAIT); // collectList ends only when the stream completes
    expect(items.size() == 3, "3 items asked, the stream completed after " + items);
    return "3 items, then complete: " + items;
  }

  static String channel(RSocket rs) {
    List<String> items =
        rs.requestChannel(Flux.range(0, 3).map(i -> payload(WORK)))
            .map(p -> serverOf(data(p)))
            .collectList()
            .block(WAIT);
    expect(items.size() == 3, "3 items in, the channel completed after " + items);
    return "3 in, 3 out, then complete: " + items;
  }

  static String fireAndForget(RSocket rs) {
    rs.fireAndForget(payload(WORK)).block(WAIT);
    return "sent; then the connection " + answer(rs, payload(WORK));
  }

  static String metadataPush(RSocket rs) {
    rs.metadataPush(DefaultPayload.create(new byte[0], bytes(routing("work")))).block(WAIT);
    return "sent; then the connection " + answer(rs, payload(WORK));
  }

  /** lblab takes no resumption: SETUP with a resume token must be refused, not hang. */
  static String resumeRejected() {
    long t0 = System.nanoTime();
    try {
      String got = onNew(base().resume(new Resume()), rs -> answer(rs, payload(WORK)));
      throw new AssertionError("SETUP with resume was served: " + got);
    } catch (SetupException e) {
      String message = String.valueOf(e.getMessage());
      expect(message.contains("resum"), "the refusal does not name resumption: " + describe(e));
      return describe(e) + " after " + (System.nanoTime() - t0) / 1_000_000 + " ms";
    } catch (Exception e) {
      throw new AssertionError("SETUP with resume: " + describe(e), e);
    }
  }

  // ------------------------------------------------------------------ dispose mode

  static void dispose() throws Exception {
    RSocket rs = base().connect(TcpClientTransport.create(host, port)).block(WAIT);
    for (int i = 0; i < DISPOSED; i++) {
      rs.requestResponse(payload(WORK)).subscribe(Payload::release, e -> {});
    }
    System.out.println("{\"sent\": " + DISPOSED + "}");
    System.out.flush();
    CountDownLatch closed = new CountDownLatch(1);
    Thread reader =
        new Thread(
            () -> {
              try {
                while (System.in.read() >= 0) {}
              } catch (IOException e) {
                // closed either way
              }
              closed.countDown();
            });
    reader.setDaemon(true);
    reader.start();
    closed.await(HOLD.toSeconds(), TimeUnit.SECONDS);
    rs.dispose();
  }

  // ------------------------------------------------------------------ helpers

  static void report(Check c) {
    boolean ok;
    String detail;
    try {
      detail = c.body().run();
      ok = true;
    } catch (Throwable e) {
      ok = false;
      detail = e instanceof AssertionError ? e.getMessage() : describe(e);
    }
    System.out.println(
        "{\"check\": " + quote(c.name()) + ", \"ok\": " + ok + ", \"detail\": " + quote(detail) + "}");
    System.out.flush();
  }

  static void expect(boolean ok, String what) {
    if (!ok) {
      throw new AssertionError(what);
    }
  }

  /** A failure in words; a blocking read past its deadline says so. */
  static String describe(Throwable e) {
    if (e instanceof IllegalStateException && String.valueOf(e.getMessage()).startsWith("Timeout")) {
      return "no answer within " + WAIT.toSeconds() + " s (" + e.getMessage() + ")";
    }
    Throwable cause = e.getClass() == RuntimeException.class && e.getCause() != null ? e.getCause() : e;
    return cause.getClass().getName() + ": " + cause.getMessage();
  }

  static String padded(int padBytes) {
    return "{\"work_bytes\": 100, \"pad\": \"" + "x".repeat(padBytes) + "\"}";
  }

  static Payload payload(String data) {
    return DefaultPayload.create(data);
  }

  /** {@code data} with composite metadata holding one routing entry, route {@code work}. */
  static Payload routed(String data) {
    return DefaultPayload.create(data.getBytes(StandardCharsets.UTF_8), bytes(routing("work")));
  }

  static ByteBuf routing(String route) {
    ByteBufAllocator alloc = ByteBufAllocator.DEFAULT;
    CompositeByteBuf metadata = alloc.compositeBuffer();
    CompositeMetadataCodec.encodeAndAddMetadata(
        metadata,
        alloc,
        WellKnownMimeType.MESSAGE_RSOCKET_ROUTING,
        TaggingMetadataCodec.createRoutingMetadata(alloc, List.of(route)).getContent());
    return metadata;
  }

  static byte[] bytes(ByteBuf buf) {
    try {
      return ByteBufUtil.getBytes(buf);
    } finally {
      buf.release();
    }
  }

  static String data(Payload p) {
    expect(p != null, "the request completed without an answer");
    try {
      return p.getDataUtf8();
    } finally {
      p.release();
    }
  }

  static String serverOf(String answer) {
    Matcher m = SERVER.matcher(answer);
    expect(m.find(), "an answer without \"server\": " + answer);
    return m.group(1);
  }

  static String quote(String s) {
    StringBuilder out = new StringBuilder("\"");
    for (char ch : String.valueOf(s).toCharArray()) {
      switch (ch) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        default -> {
          if (ch < 0x20) {
            out.append(String.format("\\u%04x", (int) ch));
          } else {
            out.append(ch);
          }
        }
      }
    }
    return out.append('"').toString();
  }
}
