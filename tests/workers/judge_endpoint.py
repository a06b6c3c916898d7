"""A local OpenAI-compatible chat endpoint standing in for a judge model server (isolates judge tests)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Endpoint:
    """Answers /v1/chat/completions with `reply`, or with HTTP `status` when set; records the prompts. While
    `hold` is clear, requests wait (a judge that hangs: a worker is then provably mid-task)."""

    def __init__(self):
        self.reply, self.status, self.prompts = "4", 200, []
        self.hold = threading.Event()
        self.hold.set()
        self.received = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.prompts.append(body["messages"][0]["content"])
                outer.received.set()
                outer.hold.wait(timeout=60)
                if outer.status != 200:
                    self.send_response(outer.status)
                    self.end_headers()
                    return
                data = json.dumps(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": outer.reply},
                            }
                        ],
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"

    def close(self) -> None:
        self.hold.set()
        self.server.shutdown()
