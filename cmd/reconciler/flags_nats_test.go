package main

import "testing"

// TestNATSReplicasFlag: --nats-replicas takes auto or a number from 1;
// zero, a negative number or a word is a usage error naming the flag,
// before anything connects.
func TestNATSReplicasFlag(t *testing.T) {
	for _, v := range []string{"0", "-1", "three"} {
		cliCase{args: []string{"executor", "--nats-url", "nats://127.0.0.1:1", "--nats-replicas", v}, wantCode: 2,
			wantStderr: []string{`invalid argument "` + v + `" for "--nats-replicas" flag: want a number from 1, or auto`}}.check(t)
	}
	for _, tc := range []struct {
		value string
		want  int
	}{{"auto", 0}, {"1", 1}, {"5", 5}} {
		var r replicasValue
		if err := r.Set(tc.value); err != nil || int(r) != tc.want {
			t.Errorf("--nats-replicas %s = %d, %v; want %d", tc.value, r, err, tc.want)
		}
		if r.String() != tc.value {
			t.Errorf("--nats-replicas %s reads back as %s", tc.value, r.String())
		}
	}
}

// TestNATSUserFlags: --nats-user goes with --nats-password-file, and
// neither with --nats-creds; a mismatch is a usage error before anything
// connects.
func TestNATSUserFlags(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--nats-user", "ferry-executor"}, "user ferry-executor without a password file"},
		{[]string{"--nats-password-file", "/p"}, "a password file (/p) without a user"},
		{[]string{"--nats-user", "ferry-executor", "--nats-password-file", "/p", "--nats-creds", "/c"}, "a user (ferry-executor) and a credentials file (/c)"},
	} {
		cliCase{args: append([]string{"executor", "--nats-url", "nats://127.0.0.1:1"}, tc.flags...), wantCode: 2, wantStderr: []string{tc.want}}.check(t)
	}
}
