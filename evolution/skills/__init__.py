"""Skills: named procedures a version carries, distilled from a window's trajectories and
users' guidance (`operator`). Retrieving and injecting them for a request is the version
runtime's (`runtime.version.skills`)."""
