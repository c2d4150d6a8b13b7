// cohort-bench's JGroups peer comparison (issue 7): the same workload as Cohort's closed group
// calls, on JGroups 5 (tools/bench/jgroups/pom.xml): n members on 127.0.0.1 over TCP with the
// SEQUENCER protocol (total order), each with an echo method behind an RpcDispatcher; a driver
// member multicasts the call to the whole group (total order through the sequencer) and waits for
// the first reply or for every reply, sequentially (p50, p99) and with C concurrent callers.
//
//   java -cp jgroups.jar:. JGroupsBench member PORT HOSTS
//   java -cp jgroups.jar:. JGroupsBench driver PORT HOSTS MEMBERS SEQ_MS WINDOW_MS PAYLOAD CALLERS
//   java -cp jgroups.jar:. JGroupsBench failover PORT HOSTS MEMBERS PID SIGNAL BEFORE_MS AFTER_MS
//
// failover: sequential wait-for-majority calls; after BEFORE_MS the driver sends SIGNAL (KILL or
// STOP) to PID (the first member: coordinator and sequencer) and goes on for AFTER_MS; it prints
// "stall_ms S recovered R ok_before A ok_after B failed F": the longest gap between completions
// that ends after the signal (if no call completed after it, the time from the last completion to
// the end, with recovered 0).
//
// HOSTS: the TCPPING initial hosts, e.g. 127.0.0.1[7800],127.0.0.1[7801]. The driver prints one
// line per measurement: "first|all p50_us P p99_us Q" and "first|all callers C ops/s R".
import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.jgroups.Address;
import org.jgroups.JChannel;
import org.jgroups.blocks.MethodCall;
import org.jgroups.blocks.RequestOptions;
import org.jgroups.blocks.ResponseMode;
import org.jgroups.blocks.RpcDispatcher;
import org.jgroups.blocks.RspFilter;
import org.jgroups.util.RspList;

public class JGroupsBench {
  public static class Echo {
    public byte[] echo(byte[] payload) { return payload; }
  }

  public static JChannel Join(int port, String hosts) throws Exception {
    String xml = "<config xmlns=\"urn:org:jgroups\">\n"
        + "<TCP bind_addr=\"127.0.0.1\" bind_port=\"" + port + "\" port_range=\"0\""
        + " tcp_nodelay=\"true\" thread_pool.min_threads=\"2\" thread_pool.max_threads=\"200\"/>\n"
        + "<TCPPING initial_hosts=\"" + hosts + "\" port_range=\"0\"/>\n"
        + "<MERGE3/>\n<FD_SOCK2/>\n<FD_ALL3/>\n<VERIFY_SUSPECT2/>\n"
        + "<pbcast.NAKACK2 use_mcast_xmit=\"false\"/>\n<UNICAST3/>\n<pbcast.STABLE/>\n"
        + "<pbcast.GMS print_local_addr=\"false\" join_timeout=\"2000\"/>\n"
        + "<SEQUENCER/>\n<UFC/>\n<MFC/>\n<FRAG4/>\n</config>\n";
    // From memory, not a temporary file: the bench ends members with SIGKILL, which skips
    // deleteOnExit (each run left its members' files in /tmp).
    JChannel channel =
        new JChannel(new ByteArrayInputStream(xml.getBytes(StandardCharsets.UTF_8)));
    channel.connect("cohort-bench");
    return channel;
  }

  static RpcDispatcher Serve(JChannel channel) {
    RpcDispatcher dispatcher = new RpcDispatcher(channel, new Echo());
    return dispatcher;
  }

  public static MethodCall Call(byte[] payload) throws Exception {
    return new MethodCall(Echo.class.getMethod("echo", byte[].class), payload);
  }

  // One group call: multicast to every member (the driver too), totally ordered by SEQUENCER.
  static boolean Invoke(RpcDispatcher dispatcher, byte[] payload, ResponseMode mode)
      throws Exception {
    RequestOptions options = new RequestOptions(mode, 5000);
    // The driver is a client, not a server: the replies counted are the servers' (as Cohort's).
    options.exclusionList(dispatcher.getChannel().getAddress());
    RspList<byte[]> replies = dispatcher.callRemoteMethods(null, Call(payload), options);
    return mode == ResponseMode.GET_FIRST ? replies.numReceived() >= 1
                                          : replies.numReceived() == replies.size();
  }

  static void Measure(RpcDispatcher dispatcher, String name, ResponseMode mode, int seqMs,
                      int windowMs, byte[] payload, int[] callers) throws Exception {
    List<Long> took = new ArrayList<>();
    long warm = System.nanoTime() + 1_500_000_000L;  // warm-up (JIT): 1.5 s or 2000 calls
    for (int i = 0; i < 2000 && System.nanoTime() < warm; ++i) Invoke(dispatcher, payload, mode);
    long end = System.nanoTime() + seqMs * 1_000_000L;
    while (System.nanoTime() < end && took.size() < 20000) {
      long start = System.nanoTime();
      if (Invoke(dispatcher, payload, mode)) took.add((System.nanoTime() - start) / 1000);
    }
    long[] sorted = took.stream().mapToLong(Long::longValue).sorted().toArray();
    if (sorted.length > 0) {
      System.out.println(name + " p50_us " + sorted[sorted.length / 2] + " p99_us "
          + sorted[Math.min(sorted.length - 1, sorted.length * 99 / 100)]);
    }
    for (int c : callers) {
      AtomicLong done = new AtomicLong();
      AtomicBoolean stop = new AtomicBoolean();
      List<Thread> threads = new ArrayList<>();
      for (int t = 0; t < c; ++t) {
        Thread thread = new Thread(() -> {
          try {
            while (!stop.get()) {
              if (Invoke(dispatcher, payload, mode)) done.incrementAndGet();
            }
          } catch (Exception e) {
            // a failed call ends this caller; the count says how many completed
          }
        });
        threads.add(thread);
        thread.start();
      }
      long start = System.nanoTime();
      Thread.sleep(windowMs);
      stop.set(true);
      long count = done.get();
      double seconds = (System.nanoTime() - start) / 1e9;
      for (Thread thread : threads) thread.join();
      System.out.println(name + " callers " + c + " ops/s " + Math.round(count / seconds));
    }
  }

  static void Failover(RpcDispatcher dispatcher, int members, long pid, String signal,
                       int beforeMs, int afterMs) throws Exception {
    byte[] payload = new byte[100];
    long start = System.nanoTime();
    long signalAt = 0;
    long last = start;
    double stall = 0;
    boolean recovered = false;
    long okBefore = 0, okAfter = 0, failed = 0;
    while (true) {
      long now = System.nanoTime();
      if (signalAt == 0 && now - start >= beforeMs * 1_000_000L) {
        new ProcessBuilder("kill", "-" + signal, Long.toString(pid)).inheritIO().start().waitFor();
        signalAt = System.nanoTime();
      }
      if (signalAt != 0 && now - signalAt >= afterMs * 1_000_000L) break;
      boolean ok = false;
      try {
        // Wait-for-majority of the servers: GET_ALL cut short by a filter after a majority.
        final int majority = members / 2 + 1;
        RspFilter filter = new RspFilter() {
          int accepted = 0;
          public boolean isAcceptable(Object response, Address sender) {
            ++accepted;
            return true;
          }
          public boolean needMoreResponses() { return accepted < majority; }
        };
        RequestOptions options = new RequestOptions(ResponseMode.GET_ALL, 2000);
        options.exclusionList(dispatcher.getChannel().getAddress());
        options.rspFilter(filter);
        RspList<byte[]> replies = dispatcher.callRemoteMethods(null, Call(payload), options);
        ok = replies.numReceived() >= majority;
      } catch (Exception e) {
        ok = false;
      }
      long done = System.nanoTime();
      if (!ok) {
        ++failed;
        continue;
      }
      if (signalAt == 0) {
        ++okBefore;
      } else {
        ++okAfter;
        if (done > signalAt) {
          stall = Math.max(stall, (done - last) / 1e6);
          recovered = true;
        }
      }
      last = done;
    }
    if (!recovered) stall = (System.nanoTime() - last) / 1e6;
    System.out.println("stall_ms " + Math.round(stall) + " recovered " + (recovered ? 1 : 0)
        + " ok_before " + okBefore + " ok_after " + okAfter + " failed " + failed);
  }

  public static void main(String[] args) throws Exception {
    if (args.length >= 8 && args[0].equals("failover")) {
      JChannel channel = Join(Integer.parseInt(args[1]), args[2]);
      RpcDispatcher dispatcher = Serve(channel);
      int members = Integer.parseInt(args[3]);
      long deadline = System.currentTimeMillis() + 30000;
      while (channel.getView().size() < members + 1 && System.currentTimeMillis() < deadline) {
        Thread.sleep(50);
      }
      Failover(dispatcher, members, Long.parseLong(args[4]), args[5], Integer.parseInt(args[6]),
               Integer.parseInt(args[7]));
      channel.close();
      System.exit(0);
    }
    if (args.length >= 3 && args[0].equals("member")) {
      JChannel channel = Join(Integer.parseInt(args[1]), args[2]);
      Serve(channel);
      System.out.println("ready " + channel.getAddress());
      System.out.flush();
      Thread.sleep(Long.MAX_VALUE);
      return;
    }
    if (args.length < 8 || !args[0].equals("driver")) {
      System.err.println("usage: JGroupsBench member PORT HOSTS | driver PORT HOSTS MEMBERS SEQ_MS"
          + " WINDOW_MS PAYLOAD CALLERS");
      System.exit(2);
    }
    JChannel channel = Join(Integer.parseInt(args[1]), args[2]);
    RpcDispatcher dispatcher = Serve(channel);
    int members = Integer.parseInt(args[3]);
    long deadline = System.currentTimeMillis() + 30000;
    while (channel.getView().size() < members + 1 && System.currentTimeMillis() < deadline) {
      Thread.sleep(50);
    }
    if (channel.getView().size() < members + 1) {
      System.err.println("view " + channel.getView() + ": want " + (members + 1) + " members");
      System.exit(1);
    }
    byte[] payload = new byte[Integer.parseInt(args[6])];
    Arrays.fill(payload, (byte) 'x');
    int[] callers = Arrays.stream(args[7].split(",")).mapToInt(Integer::parseInt).toArray();
    int seqMs = Integer.parseInt(args[4]);
    int windowMs = Integer.parseInt(args[5]);
    Measure(dispatcher, "first", ResponseMode.GET_FIRST, seqMs, windowMs, payload, callers);
    Measure(dispatcher, "all", ResponseMode.GET_ALL, seqMs, windowMs, payload, callers);
    channel.close();
    System.exit(0);
  }
}
