"""The simulation kit: what the demo (`evoplane.demo`) and the scenario suite
(`evoplane.scenarios`) both play their worlds with, through the product's public
interfaces only.

`stack` (a running or embedded stack's endpoints), `clients` (the SDKs an agent is written
on, pointed at the gateway by its base URL), `agent` (one tenant's deployment of an agent:
its SDK client and the reports an app sends to `/v1/events` and `/v1/feedback`),
`feedback` (what a feedback widget sends about an answer), `traffic` (sessions played a
few at a time, and their first-time success), `evolutions` (an evolution started and
followed through the control API, with traffic while its live gates watch), `progress`
(what a run tells the CLI as it goes) and `report` (the blocks and tables its results
print in, within 80 columns). Each world, its users' habits and what a run must show stay
with the demo or the suite.
"""

__all__: list[str] = []
