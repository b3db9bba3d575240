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
