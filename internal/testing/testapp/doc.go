// Command testapp is the one program of the container images that the
// test environment runs on real nodes (testenv.TestImages): a static
// binary, so that an image needs nothing else, with one role per first
// argument.
//
//	testapp pause             a pod sandbox's first process: it waits for
//	                          SIGTERM and reaps the children it inherits
//	testapp serve [addr]      an HTTP server (default :8080): /ready answers
//	                          200, / answers "<hostname> <caller's IP>"; on
//	                          SIGTERM /ready answers 503 and / goes on for 3 s
//	testapp client url [addr] calls url every 100 ms and serves its counts
//	                          as JSON on addr (default :8081): calls, ok,
//	                          failed, the longest run of failures and the
//	                          answers it got, by answer
//
// The answer of serve names the caller's address as the server saw it, so
// that a test can tell which way a call went (through a tunnel whose end
// rewrites the source, or straight).
//
// It is test support: only testenv builds it, into images; it imports
// nothing of ferry's.
package main
