// Package testenv starts the real servers personaq's tests run against: an
// in-process JetStream-enabled nats-server (StartNATS) and a redis-server
// process on a free loopback port (StartRedis). Each helper stops its server
// when the test ends and can stop and restart it for outage tests.
//
// StartRedis needs the redis-server binary (Debian: `apt-get install
// redis-server`; or set PERSONAQ_REDIS_SERVER to its path). Without it the
// test is skipped, unless CI is set, in which case it fails.
package testenv
