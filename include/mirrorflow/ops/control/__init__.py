"""Control of a flow: pause, resume, stop (`flow_control`), through every door."""
