#!/usr/bin/env bash
# Writes a throwaway PKI for the TLS tests into $1: a CA, a server certificate for 127.0.0.1 /
# localhost, a client certificate signed by the CA, and a second CA with a client certificate the
# server must not trust. Keys are unencrypted except server-pass.key (passphrase "hunter2").
set -euo pipefail
dir=$1
mkdir -p "$dir"
cd "$dir"
days=2
subj() { echo "/O=prefixd tests/CN=$1"; }
ca() {  # name
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" \
    -out "$1.crt" -days $days -subj "$(subj "$1")" 2>/dev/null
}
leaf() {  # name ca extensions
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" -out "$1.csr" \
    -subj "$(subj "$1")" 2>/dev/null
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -out "$1.crt" \
    -days $days -extfile "$1.ext" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
ca ca
ca rogue-ca
leaf server ca "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth"
leaf server2 ca "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth"
leaf client ca "extendedKeyUsage=clientAuth"
leaf rogue-client rogue-ca "extendedKeyUsage=clientAuth"
openssl pkey -in server2.key -aes256 -passout pass:hunter2 -out server2-pass.key
# A CA directory in OpenSSL's hashed layout, for tls-ca-cert-dir.
mkdir -p ca-dir
cp ca.crt ca-dir/
openssl rehash ca-dir 2>/dev/null || c_rehash ca-dir >/dev/null
