"""The wire to the ``claude`` CLI, without tools or features: WebSocket frames without I/O
(:mod:`.frames`), the connection and the server on trio (:mod:`.websocket`), the opening
handshake (:mod:`.handshake`), JSON-RPC messages (:mod:`.jsonrpc`) and JSON text
(:mod:`.jsontext`), the tasks that answer one connection (:mod:`.workers`), what the server
and its clients agree on (:mod:`.constants`), what a client says first (:mod:`.hello`), and
the answers a server gives before it loads (:mod:`.early`)."""
