/// One entry of the audit log, as the agent and the CLI record it and every report reads it.
public struct AgentEvent: Sendable, Equatable {
    public var id: Int64?
    /// When it happened, to the millisecond (the log stores and hashes its milliseconds).
    public var time: Instant
    public var user: String?
    /// A stable word for scripts: `agent-started`, `clock-jump`, `database-corrupt`, ...
    public var kind: EventKind
    /// Words for people.
    public var message: String
    /// Details as a JSON object, for scripts.
    public var data: JSONValue?

    public init(id: Int64? = nil, time: Instant, user: String? = nil, kind: EventKind, message: String, data: JSONValue? = nil) {
        self.id = id
        self.time = time
        self.user = user
        self.kind = kind
        self.message = message
        self.data = data
    }
}
