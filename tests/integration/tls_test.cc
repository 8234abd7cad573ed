// TLS over real sockets against the real binary with Redis's own client (redis-cli --tls) and
// OpenSSL's s_client: client certificates required / optional / not asked for, a plain-text
// client on the TLS port, large values both ways, certificate reload by CONFIG SET, tls-port with
// port 0. Certificates are made fresh for each test by tls/make_certs.sh.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "integration/server_fixture.h"

namespace prefixd::it {
namespace {

struct Outcome {
  int status = -1;
  std::string output;  // stdout and stderr together
};

// Runs `command` through the shell (each one bounded by `timeout`).
Outcome Shell(const std::string& command) {
  Outcome out;
  FILE* pipe = ::popen(("timeout 20 " + command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.output.append(buf.data(), n);
  int status = ::pclose(pipe);
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// The server's log once it contains `text` (it writes from its own thread), waiting up to 3 s.
std::string LogWith(ServerProcess& server, const std::string& text) {
  std::string log;
  for (int i = 0; i < 60; ++i) {
    log = server.ReadLog();
    if (log.find(text) != std::string::npos) break;
    std::this_thread::sleep_for(Millis(50));
  }
  return log;
}

class TlsTest : public ServerTest {
 protected:
  void SetUp() override {
    static int serial = 0;
    certs_ = std::filesystem::temp_directory_path().string() + "/prefixd-tls-" +
             std::to_string(::getpid()) + "-" + std::to_string(++serial);
    Outcome made = Shell(std::string(PREFIXD_TLS_CERT_SCRIPT) + " " + certs_);
    ASSERT_EQ(made.status, 0) << made.output;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(certs_, ec);
  }

  std::string Cert(const std::string& name) const { return certs_ + "/" + name; }

  // Starts the server with a TLS port (and the plain one the fixture waits on).
  void StartTls(std::vector<std::string> extra = {}) {
    tls_port_ = FreeLoopbackPort();
    ServerProcess::Options options;
    options.flags = {
        "--tls-port",     std::to_string(tls_port_), "--tls-cert-file",    Cert("server.crt"),
        "--tls-key-file", Cert("server.key"),        "--tls-ca-cert-file", Cert("ca.crt")};
    options.flags.insert(options.flags.end(), extra.begin(), extra.end());
    ASSERT_NO_FATAL_FAILURE(StartServer(options));
  }

  // redis-cli over TLS; `client` names a certificate/key pair ("" for none).
  Outcome Cli(const std::string& client, const std::string& args, int port = 0) {
    std::string cmd = "redis-cli -p " + std::to_string(port ? port : tls_port_) +
                      " --tls --cacert " + Cert("ca.crt");
    if (!client.empty()) {
      cmd += " --cert " + Cert(client + ".crt") + " --key " + Cert(client + ".key");
    }
    return Shell(cmd + " " + args);
  }

  // The subject of the certificate the server presents now.
  std::string PresentedSubject() {
    return Shell("sh -c 'openssl s_client -connect 127.0.0.1:" + std::to_string(tls_port_) +
                 " -cert " + Cert("client.crt") + " -key " + Cert("client.key") +
                 " </dev/null 2>/dev/null | openssl x509 -noout -subject'")
        .output;
  }

  std::string certs_;
  int tls_port_ = 0;
};

TEST_F(TlsTest, ClientCertificateRequiredByDefault) {
  ASSERT_NO_FATAL_FAILURE(StartTls());
  Outcome ok = Cli("client", "PING");
  EXPECT_EQ(ok.output, "PONG\n");
  // No certificate, or one from a CA the server does not trust: no session, no reply.
  EXPECT_EQ(Cli("", "PING").output.find("PONG"), std::string::npos);
  EXPECT_EQ(Cli("rogue-client", "PING").output.find("PONG"), std::string::npos);
  std::string log = LogWith(server_, "certificate verify failed");
  EXPECT_NE(log.find("peer did not return a certificate"), std::string::npos) << log;
  EXPECT_NE(log.find("certificate verify failed"), std::string::npos) << log;
  EXPECT_EQ(Cli("client", "PING").output, "PONG\n");
}

TEST_F(TlsTest, ClientCertificateOptionalOrNotAskedFor) {
  ASSERT_NO_FATAL_FAILURE(StartTls({"--tls-auth-clients", "optional"}));
  EXPECT_EQ(Cli("", "PING").output, "PONG\n");
  EXPECT_EQ(Cli("client", "PING").output, "PONG\n");
  // Offered, a certificate is still checked.
  EXPECT_EQ(Cli("rogue-client", "PING").output.find("PONG"), std::string::npos);
  // CONFIG SET switches it for new connections.
  EXPECT_EQ(Cli("client", "CONFIG SET tls-auth-clients no").output, "OK\n");
  EXPECT_EQ(Cli("rogue-client", "PING").output, "PONG\n");
  EXPECT_EQ(Cli("client", "CONFIG SET tls-auth-clients yes").output, "OK\n");
  EXPECT_EQ(Cli("", "PING").output.find("PONG"), std::string::npos);
}

TEST_F(TlsTest, PlainTextClientOnTheTlsPortIsDroppedWithoutHarm) {
  ASSERT_NO_FATAL_FAILURE(StartTls());
  for (int i = 0; i < 20; ++i) {
    auto plain = RawConnection::Tcp(tls_port_);
    ASSERT_TRUE(plain);
    plain->Send("PING\r\n");
    std::string got;
    EXPECT_TRUE(plain->WaitClosed(Millis(3000), &got));
    EXPECT_EQ(got.find("PONG"), std::string::npos);
  }
  // A client that connects and says nothing holds no slot: INFO counts no one but us.
  auto silent = RawConnection::Tcp(tls_port_);
  ASSERT_TRUE(silent);
  EXPECT_EQ(Cli("client", "PING").output, "PONG\n");
  Outcome clients = Cli("client", "INFO clients");
  EXPECT_NE(clients.output.find("connected_clients:1"), std::string::npos) << clients.output;
  auto plain_port = RawConnection::Tcp(server_.port());
  ASSERT_TRUE(plain_port);
  EXPECT_EQ(plain_port->Call("PING\r\n"), "+PONG\r\n");
  std::string log = LogWith(server_, "TLS handshake with");
  EXPECT_NE(log.find("TLS handshake with"), std::string::npos);
  // 20 failures, at most 5 lines per 10 s reach the log.
  size_t lines = 0;
  for (size_t p = log.find("TLS handshake with"); p != std::string::npos;
       p = log.find("TLS handshake with", p + 1)) {
    ++lines;
  }
  EXPECT_LE(lines, 6u);
}

TEST_F(TlsTest, LargeValuesRoundTrip) {
  ASSERT_NO_FATAL_FAILURE(StartTls());
  std::string blob_path = certs_ + "/blob";
  {
    std::mt19937_64 rng(7);
    std::string blob(5 * 1024 * 1024 + 3, '\0');
    for (auto& c : blob) c = static_cast<char>(rng());
    std::ofstream(blob_path, std::ios::binary) << blob;
  }
  EXPECT_EQ(Cli("client", "-x SSM.PREFIX.STORE s 0 < " + blob_path).output, "OK\n");
  Outcome same = Shell("sh -c 'redis-cli -p " + std::to_string(tls_port_) + " --tls --cacert " +
                       Cert("ca.crt") + " --cert " + Cert("client.crt") + " --key " +
                       Cert("client.key") + " --raw SSM.PREFIX.FETCH s 0 | head -c " +
                       std::to_string(5 * 1024 * 1024 + 3) + " | cmp - " + blob_path + "'");
  EXPECT_EQ(same.status, 0) << same.output;
  // The same value over the plain port: TLS changed nothing.
  auto plain = RawConnection::Tcp(server_.port());
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->Call({"SSM.PREFIX.FETCH", "s", "0"}).size(), 5u * 1024 * 1024 + 3 + 12);
}

// A TLS connection reads as a plain one does: the records OpenSSL holds go into a 64 KiB buffer
// borrowed for the read, what fits the 1 KiB array is moved there (server/connection_memory.h). A
// pipelined burst of SETs of every size (redis-cli --pipe sends it as fast as TLS takes it)
// leaves every value exact.
TEST_F(TlsTest, PipelinedBurstsAreReadWhole) {
  ASSERT_NO_FATAL_FAILURE(StartTls());
  std::mt19937 rng(3);
  std::uniform_int_distribution<size_t> length(0, 3000);
  constexpr int kKeys = 400;
  std::vector<std::string> values;
  std::string burst;
  for (int i = 0; i < kKeys; ++i) {
    std::string value(length(rng), '\0');
    for (char& ch : value) ch = static_cast<char>('a' + rng() % 26);
    burst += Multibulk({"SET", "k" + std::to_string(i), value});
    values.push_back(std::move(value));
  }
  const std::string burst_path = certs_ + "/burst";
  std::ofstream(burst_path, std::ios::binary) << burst;
  const Outcome piped = Cli("client", "--pipe < " + burst_path);
  EXPECT_NE(piped.output.find("errors: 0, replies: " + std::to_string(kKeys)), std::string::npos)
      << piped.output;
  auto plain = RawConnection::Tcp(server_.port());
  ASSERT_TRUE(plain);
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_EQ(plain->Call({"GET", "k" + std::to_string(i)}),
              "$" + std::to_string(values[i].size()) + "\r\n" + values[i] + "\r\n")
        << "key " << i;
  }
}

// A decoded V.FETCH reply is made 1 MiB at a time as the socket drains (a ReplyProducer): over
// TLS too, every window arrives whole and in order (1200-byte rows: windows cut rows in two).
TEST_F(TlsTest, DecodedRowsMadeWindowByWindowArriveExact) {
  ASSERT_NO_FATAL_FAILURE(StartTls());
  constexpr int kDim = 300, kRows = 3000;
  std::vector<float> values(size_t{kDim} * kRows);
  // Multiples of 1/8 below 250 are exact in fp16.
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 2000) / 8.0f;
  const std::string bytes(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  auto admin = RawConnection::Tcp(server_.port());
  ASSERT_TRUE(admin);
  ASSERT_EQ(admin->Call({"V.CREATE", "w", std::to_string(kDim), "VQUANT", "fp16"}), ":0\r\n");
  ASSERT_EQ(admin->Call({"V.STOREBATCH", "w", "0", "0", std::to_string(kRows), bytes}), "+OK\r\n");
  const std::string expected_path = certs_ + "/rows";
  std::ofstream(expected_path, std::ios::binary) << bytes;
  Outcome same =
      Shell("sh -c 'redis-cli -p " + std::to_string(tls_port_) + " --tls --cacert " +
            Cert("ca.crt") + " --cert " + Cert("client.crt") + " --key " + Cert("client.key") +
            " --raw V.FETCH w 0 RANGE 0 " + std::to_string(kRows) + " | head -c " +
            std::to_string(bytes.size()) + " | cmp - " + expected_path + "'");
  EXPECT_EQ(same.status, 0) << same.output;
}

// A cold value (the disk tier) is read from its file as it is written: over TLS window by window
// (pread into the writer's window), over the plain port with sendfile. Both arrive exact, the
// TLS one cut at a size that is no multiple of the window.
TEST_F(TlsTest, ColdValuesStreamedFromDiskArriveExact) {
  ASSERT_NO_FATAL_FAILURE(
      StartTls({"--appendonly", "yes", "--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru"}));
  constexpr size_t kSize = 3 * 512 * 1024 + 3;
  std::mt19937_64 rng(11);
  std::string blob(kSize, '\0');
  for (auto& c : blob) c = static_cast<char>(rng());
  const std::string blob_path = certs_ + "/cold-blob";
  std::ofstream(blob_path, std::ios::binary) << blob;
  auto plain = RawConnection::Tcp(server_.port());
  ASSERT_TRUE(plain);
  ASSERT_EQ(plain->Call({"SSM.PREFIX.STORE", "s", "0", blob}), "+OK\r\n");
  for (int i = 0; i < 6; ++i) {  // newer sessions push it to disk
    ASSERT_EQ(plain->Call({"SSM.PREFIX.STORE", "f" + std::to_string(i), "0", blob}), "+OK\r\n");
  }
  const std::string usage = plain->Call({"MEMORY", "USAGE", "s"});
  ASSERT_EQ(usage[0], ':') << usage;
  ASSERT_LT(std::stoll(usage.substr(1)), 1 << 20) << "the session is on disk";
  Outcome same = Shell("sh -c 'redis-cli -p " + std::to_string(tls_port_) + " --tls --cacert " +
                       Cert("ca.crt") + " --cert " + Cert("client.crt") + " --key " +
                       Cert("client.key") + " --raw SSM.PREFIX.FETCH s 0 | head -c " +
                       std::to_string(kSize) + " | cmp - " + blob_path + "'");
  EXPECT_EQ(same.status, 0) << same.output;
  const std::string reply = plain->Call({"SSM.PREFIX.FETCH", "s", "0"});
  EXPECT_TRUE(reply == "$" + std::to_string(kSize) + "\r\n" + blob + "\r\n")
      << "the plain port's copy differs (" << reply.size() << " bytes)";
  const std::string tier = plain->Call(std::vector<std::string>{"INFO", "disktier"});
  EXPECT_NE(tier.find("cold_promotions:0\r\n"), std::string::npos) << "both came from disk";
}

TEST_F(TlsTest, ConfigSetReloadsCertificates) {
  ASSERT_NO_FATAL_FAILURE(StartTls({"--enable-protected-configs", "local"}));
  EXPECT_NE(PresentedSubject().find("CN = server\n"), std::string::npos);
  // Replace the files in place and set the same paths: a reload.
  std::filesystem::copy_file(Cert("server2.crt"), Cert("server.crt"),
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(Cert("server2.key"), Cert("server.key"),
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_EQ(Cli("client", "CONFIG SET tls-cert-file " + Cert("server.crt") + " tls-key-file " +
                              Cert("server.key"))
                .output,
            "OK\n");
  EXPECT_NE(PresentedSubject().find("CN = server2\n"), std::string::npos);
  // A file that is not a certificate: refused, and the working configuration stays.
  Outcome bad = Cli("client", "CONFIG SET tls-cert-file " + Cert("ca.key"));
  EXPECT_EQ(bad.output,
            "ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to "
            "update TLS configuration. Check server logs.\n\n");  // redis-cli adds a blank line
  EXPECT_EQ(Cli("client", "CONFIG GET tls-cert-file").output,
            "tls-cert-file\n" + Cert("server.crt") + "\n");
  EXPECT_EQ(Cli("client", "PING").output, "PONG\n");
  // An encrypted key with its passphrase, and a CA directory instead of a file.
  EXPECT_EQ(Cli("client", "CONFIG SET tls-key-file-pass hunter2 tls-key-file " +
                              Cert("server2-pass.key") + " tls-cert-file " + Cert("server.crt") +
                              " tls-ca-cert-file '' tls-ca-cert-dir " + Cert("ca-dir"))
                .output,
            "OK\n");
  EXPECT_EQ(Cli("client", "PING").output, "PONG\n");
}

TEST_F(TlsTest, ProtocolsAndCiphers) {
  ASSERT_NO_FATAL_FAILURE(StartTls({"--tls-protocols", "TLSv1.2"}));
  std::string base = "sh -c 'openssl s_client -connect 127.0.0.1:" + std::to_string(tls_port_) +
                     " -cert " + Cert("client.crt") + " -key " + Cert("client.key");
  EXPECT_NE(Shell(base + " -tls1_2 </dev/null'").output.find("Protocol  : TLSv1.2"),
            std::string::npos);
  EXPECT_NE(Shell(base + " -tls1_3 </dev/null'").status, 0);
  EXPECT_EQ(Cli("client", "CONFIG SET tls-protocols TLSv9").output,
            "ERR CONFIG SET failed (possibly related to argument 'tls-protocols') - Unable to "
            "update TLS configuration. Check server logs.\n\n");  // redis-cli adds a blank line
  EXPECT_NE(LogWith(server_, "Invalid tls-protocols").find("Invalid tls-protocols specified"),
            std::string::npos);
}

TEST_F(TlsTest, TlsPortWithPortZeroServesOnlyTls) {
  // The fixture waits on a plain port, so this server is started by hand.
  std::string dir = certs_ + "/data";
  int port = FreeLoopbackPort();
  std::string log = certs_ + "/server.log";
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string tls_port = std::to_string(port);
    std::string cert = Cert("server.crt"), key = Cert("server.key"), ca = Cert("ca.crt");
    FILE* out = std::freopen(log.c_str(), "w", stdout);
    (void)out;
    ::dup2(STDOUT_FILENO, STDERR_FILENO);
    ::execl(ServerBinary().c_str(), "prefixd-server", "--port", "0", "--tls-port", tls_port.c_str(),
            "--tls-cert-file", cert.c_str(), "--tls-key-file", key.c_str(), "--tls-ca-cert-file",
            ca.c_str(), "--dir", dir.c_str(), "--appendonly", "no", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(pid, 0);
  std::string pong;
  for (int i = 0; i < 100 && pong != "PONG\n"; ++i) {
    std::this_thread::sleep_for(Millis(50));
    pong = Cli("client", "PING", port).output;
  }
  EXPECT_EQ(pong, "PONG\n");
  EXPECT_EQ(Cli("client", "CONFIG GET port", port).output, "port\n0\n");
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("no plain TCP port, TLS 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << text;
}

TEST_F(TlsTest, MisconfiguredTlsStopsTheStart) {
  ServerProcess::Options options;
  options.flags = {"--tls-port",         std::to_string(FreeLoopbackPort()),
                   "--tls-cert-file",    Cert("server.crt"),
                   "--tls-key-file",     Cert("client.key"),
                   "--tls-ca-cert-file", Cert("ca.crt")};
  options.startup_timeout = Millis(5000);
  EXPECT_FALSE(server_.Start(options));
  EXPECT_NE(server_.ReadLog().find("Failed to configure TLS"), std::string::npos)
      << server_.ReadLog();
}

}  // namespace
}  // namespace prefixd::it
