import SystemPackage
import CurfewPOSIX
import CSystemd
import Glibc
import CLinux

/// A D-Bus value, as `SDBusMessage` reads and appends it.
public indirect enum SDBusValue: Sendable, Equatable {
    case byte(UInt8)
    case bool(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(String)
    case signature(String)
    /// The element signature is part of the value so that an empty array can be written.
    case array(elementSignature: String, [SDBusValue])
    case structure([SDBusValue])
    case dictEntry(SDBusValue, SDBusValue)
    case variant(SDBusValue)

    /// The D-Bus type signature of this value.
    public var signature: String {
        switch self {
        case .byte: "y"
        case .bool: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .array(let elementSignature, _): "a" + elementSignature
        case .structure(let fields): "(" + fields.map(\.signature).joined() + ")"
        case .dictEntry(let key, let value): "{" + key.signature + value.signature + "}"
        case .variant: "v"
        }
    }

    /// The text of a string, object path or signature; looks through a variant.
    public var stringValue: String? {
        switch self {
        case .string(let text), .objectPath(let text), .signature(let text): text
        case .variant(let inner): inner.stringValue
        default: nil
        }
    }

    public var boolValue: Bool? {
        switch self {
        case .bool(let flag): flag
        case .variant(let inner): inner.boolValue
        default: nil
        }
    }

    public var uint32Value: UInt32? {
        switch self {
        case .uint32(let number): number
        case .variant(let inner): inner.uint32Value
        default: nil
        }
    }

    /// The fields of a structure; looks through a variant.
    public var structureFields: [SDBusValue]? {
        switch self {
        case .structure(let fields): fields
        case .variant(let inner): inner.structureFields
        default: nil
        }
    }

    /// An `a{sv}` or `a{s*}` as a dictionary keyed by string, variants unwrapped; nil for anything else.
    public var stringKeyedDictionary: [String: SDBusValue]? {
        guard case .array(_, let elements) = self else { return nil }
        var result: [String: SDBusValue] = [:]
        for element in elements {
            guard case .dictEntry(let key, let value) = element, let name = key.stringValue else { return nil }
            if case .variant(let inner) = value {
                result[name] = inner
            } else {
                result[name] = value
            }
        }
        return result
    }
}

/// One `sd_bus_message*`, referenced while this object lives (`sd_bus_message_unref` on deinit).
/// Not thread-safe: a message belongs to the thread that uses its bus.
public final class SDBusMessage {
    let handle: OpaquePointer

    /// Takes over a reference the caller owns.
    init(adopting handle: OpaquePointer) {
        self.handle = handle
    }

    /// Takes a new reference (`sd_bus_message_ref`), for messages lent to a callback.
    init(retaining handle: OpaquePointer) {
        self.handle = sd_bus_message_ref(handle)
    }

    deinit {
        sd_bus_message_unref(handle)
    }

    /// `sd_bus_message_get_path`.
    public var path: String? { sd_bus_message_get_path(handle).map { String(cString: $0) } }
    /// `sd_bus_message_get_interface`.
    public var interface: String? { sd_bus_message_get_interface(handle).map { String(cString: $0) } }
    /// `sd_bus_message_get_member`.
    public var member: String? { sd_bus_message_get_member(handle).map { String(cString: $0) } }
    /// `sd_bus_message_get_sender`: the unique name of the sending connection, when the bus set it.
    public var sender: String? { sd_bus_message_get_sender(handle).map { String(cString: $0) } }
    /// `sd_bus_message_get_signature` of the whole body.
    public var signature: String { sd_bus_message_get_signature(handle, 1).map { String(cString: $0) } ?? "" }
    /// Whether this is a method call (`sd_bus_message_get_type` is SD_BUS_MESSAGE_METHOD_CALL).
    public var isMethodCall: Bool {
        var type: UInt8 = 0
        return sd_bus_message_get_type(handle, &type) >= 0 && type == UInt8(SD_BUS_MESSAGE_METHOD_CALL)
    }
    /// Whether the caller waits for a reply (`sd_bus_message_get_expect_reply`).
    public var expectsReply: Bool { sd_bus_message_get_expect_reply(handle) > 0 }

    /// Appends values with `sd_bus_message_append_basic` and, for containers,
    /// `sd_bus_message_open_container` / `sd_bus_message_close_container`.
    public func append(_ values: [SDBusValue]) throws(LinuxSystemdError) {
        for value in values { try append(value) }
    }

    /// Reads every value from the read position to the end of the message (or of the container
    /// entered), with `sd_bus_message_peek_type`, `sd_bus_message_read_basic` and
    /// `sd_bus_message_enter_container` / `sd_bus_message_exit_container`.
    public func readAll() throws(LinuxSystemdError) -> [SDBusValue] {
        var values: [SDBusValue] = []
        while let value = try readValue() { values.append(value) }
        return values
    }

    /// Moves the read position back to the first argument (`sd_bus_message_rewind`).
    public func rewind() throws(LinuxSystemdError) {
        try LinuxSystemdError.check("sd_bus_message_rewind") { sd_bus_message_rewind(handle, 1) }
    }

    private func append(_ value: SDBusValue) throws(LinuxSystemdError) {
        switch value {
        case .byte(let number): try appendBasic("y", number)
        case .bool(let flag): try appendBasic("b", Int32(flag ? 1 : 0))
        case .int16(let number): try appendBasic("n", number)
        case .uint16(let number): try appendBasic("q", number)
        case .int32(let number): try appendBasic("i", number)
        case .uint32(let number): try appendBasic("u", number)
        case .int64(let number): try appendBasic("x", number)
        case .uint64(let number): try appendBasic("t", number)
        case .double(let number): try appendBasic("d", number)
        case .string(let text): try appendText("s", text)
        case .objectPath(let text): try appendText("o", text)
        case .signature(let text): try appendText("g", text)
        case .array(let elementSignature, let elements):
            try inContainer("a", contents: elementSignature) { () throws(LinuxSystemdError) in
                for element in elements { try append(element) }
            }
        case .structure(let fields):
            try inContainer("r", contents: fields.map(\.signature).joined()) { () throws(LinuxSystemdError) in
                for field in fields { try append(field) }
            }
        case .dictEntry(let key, let entryValue):
            try inContainer("e", contents: key.signature + entryValue.signature) { () throws(LinuxSystemdError) in
                try append(key)
                try append(entryValue)
            }
        case .variant(let inner):
            try inContainer("v", contents: inner.signature) { () throws(LinuxSystemdError) in try append(inner) }
        }
    }

    private func appendBasic<T: BitwiseCopyable>(_ type: Unicode.Scalar, _ value: T) throws(LinuxSystemdError) {
        var copy = value
        try LinuxSystemdError.check("sd_bus_message_append_basic") {
            sd_bus_message_append_basic(handle, CChar(type.value), &copy)
        }
    }

    private func appendText(_ type: Unicode.Scalar, _ text: String) throws(LinuxSystemdError) {
        // For strings, object paths and signatures append_basic takes the char* itself.
        try LinuxSystemdError.check("sd_bus_message_append_basic") {
            text.withCString { sd_bus_message_append_basic(handle, CChar(type.value), $0) }
        }
    }

    private func inContainer(
        _ type: Unicode.Scalar, contents: String, _ body: () throws(LinuxSystemdError) -> Void
    ) throws(LinuxSystemdError) {
        try LinuxSystemdError.check("sd_bus_message_open_container") {
            sd_bus_message_open_container(handle, CChar(type.value), contents)
        }
        try body()
        try LinuxSystemdError.check("sd_bus_message_close_container") { sd_bus_message_close_container(handle) }
    }

    /// The next value, or nil at the end of the message or current container.
    private func readValue() throws(LinuxSystemdError) -> SDBusValue? {
        var type: CChar = 0
        var contents: UnsafePointer<CChar>?
        let more = try LinuxSystemdError.check("sd_bus_message_peek_type") {
            sd_bus_message_peek_type(handle, &type, &contents)
        }
        if more == 0 { return nil }
        switch Unicode.Scalar(UInt8(bitPattern: type)) {
        case "y": return .byte(try readBasic(type, UInt8(0)))
        case "b": return .bool(try readBasic(type, Int32(0)) != 0)
        case "n": return .int16(try readBasic(type, Int16(0)))
        case "q": return .uint16(try readBasic(type, UInt16(0)))
        case "i": return .int32(try readBasic(type, Int32(0)))
        case "u": return .uint32(try readBasic(type, UInt32(0)))
        case "x": return .int64(try readBasic(type, Int64(0)))
        case "t": return .uint64(try readBasic(type, UInt64(0)))
        case "d": return .double(try readBasic(type, Double(0)))
        case "s": return .string(try readText(type))
        case "o": return .objectPath(try readText(type))
        case "g": return .signature(try readText(type))
        case "a", "r", "e", "v":
            let inner = contents.map { String(cString: $0) } ?? ""
            try LinuxSystemdError.check("sd_bus_message_enter_container") {
                sd_bus_message_enter_container(handle, type, contents)
            }
            let elements = try readAll()
            try LinuxSystemdError.check("sd_bus_message_exit_container") { sd_bus_message_exit_container(handle) }
            switch Unicode.Scalar(UInt8(bitPattern: type)) {
            case "a": return .array(elementSignature: inner, elements)
            case "r": return .structure(elements)
            case "e":
                guard elements.count == 2 else {
                    throw LinuxSystemdError(operation: "read dict entry \(inner)", errno: .badMessage)
                }
                return .dictEntry(elements[0], elements[1])
            default:
                guard elements.count == 1 else {
                    throw LinuxSystemdError(operation: "read variant \(inner)", errno: .badMessage)
                }
                return .variant(elements[0])
            }
        default:
            // Unix file descriptors ("h") would need an owner; nothing here reads them.
            throw LinuxSystemdError(
                operation: "read D-Bus type \(Character(Unicode.Scalar(UInt8(bitPattern: type))))", errno: .notSupportedOnSocket)
        }
    }

    private func readBasic<T: BitwiseCopyable>(_ type: CChar, _ initial: T) throws(LinuxSystemdError) -> T {
        var value = initial
        try LinuxSystemdError.check("sd_bus_message_read_basic") { sd_bus_message_read_basic(handle, type, &value) }
        return value
    }

    private func readText(_ type: CChar) throws(LinuxSystemdError) -> String {
        var pointer: UnsafePointer<CChar>?
        try LinuxSystemdError.check("sd_bus_message_read_basic") { sd_bus_message_read_basic(handle, type, &pointer) }
        return pointer.map { String(cString: $0) } ?? ""
    }
}

@available(*, unavailable, message: "an sd-bus message belongs to the thread that uses its bus")
extension SDBusMessage: Sendable {}

/// One `sd_bus*` connection, owned by this object (`sd_bus_flush_close_unref` on deinit). Every call's
/// negative-errno result is checked by `LinuxSystemdError.check`, which also retries EINTR.
/// Not thread-safe (sd-bus is not): use it from one thread at a time, for example behind a `Mutex`.
public final class SDBus {
    let handle: OpaquePointer
    /// Handlers installed by `addMatch`; their match slots are floating, so they live as long as the bus.
    private var matchHandlers: [MatchHandler] = []
    /// Handlers installed by `addObject`, for as long as the bus.
    private var objectHandlers: [ObjectHandler] = []

    private init(handle: OpaquePointer) {
        self.handle = handle
    }

    deinit {
        sd_bus_flush_close_unref(handle)
    }

    /// Connects to the system bus (`sd_bus_open_system`; honours `DBUS_SYSTEM_BUS_ADDRESS`).
    public static func openSystem() throws(LinuxSystemdError) -> SDBus {
        var bus: OpaquePointer?
        try LinuxSystemdError.check("sd_bus_open_system") { sd_bus_open_system(&bus) }
        guard let bus else { throw LinuxSystemdError(operation: "sd_bus_open_system", errno: .invalidArgument) }
        return SDBus(handle: bus)
    }

    /// Connects as a bus client to the bus at `address`, for example `unix:path=/run/dbus/x` (`sd_bus_new`,
    /// `sd_bus_set_address`, `sd_bus_set_bus_client(1)`, `sd_bus_start`).
    public static func open(address: String) throws(LinuxSystemdError) -> SDBus {
        var created: OpaquePointer?
        try LinuxSystemdError.check("sd_bus_new") { sd_bus_new(&created) }
        guard let created else { throw LinuxSystemdError(operation: "sd_bus_new", errno: .invalidArgument) }
        // From here the wrapper owns the handle, so a failure below releases it.
        let bus = SDBus(handle: created)
        try LinuxSystemdError.check("sd_bus_set_address") { sd_bus_set_address(created, address) }
        try LinuxSystemdError.check("sd_bus_set_bus_client") { sd_bus_set_bus_client(created, 1) }
        try LinuxSystemdError.check("sd_bus_start") { sd_bus_start(created) }
        return bus
    }

    /// `open(address:)` for an address, `openSystem()` for nil.
    public static func open(address: String?) throws(LinuxSystemdError) -> SDBus {
        if let address { try open(address: address) } else { try openSystem() }
    }

    /// This connection's unique name on the bus, such as `:1.42` (`sd_bus_get_unique_name`).
    public func uniqueName() throws(LinuxSystemdError) -> String {
        var name: UnsafePointer<CChar>?
        try LinuxSystemdError.check("sd_bus_get_unique_name") { sd_bus_get_unique_name(handle, &name) }
        return name.map { String(cString: $0) } ?? ""
    }

    /// A new method call message (`sd_bus_message_new_method_call`).
    public func newMethodCall(
        destination: String, path: String, interface: String, member: String
    ) throws(LinuxSystemdError) -> SDBusMessage {
        var message: OpaquePointer?
        try LinuxSystemdError.check("sd_bus_message_new_method_call \(interface).\(member)") {
            sd_bus_message_new_method_call(handle, &message, destination, path, interface, member)
        }
        guard let message else {
            throw LinuxSystemdError(operation: "sd_bus_message_new_method_call \(interface).\(member)", errno: .invalidArgument)
        }
        return SDBusMessage(adopting: message)
    }

    /// Sends `message` and waits for its reply (`sd_bus_call`); nil `timeout` is sd-bus's default (25 s).
    /// An error reply throws with the D-Bus error name and text.
    public func call(_ message: SDBusMessage, timeout: Duration? = nil) throws(LinuxSystemdError) -> SDBusMessage {
        let operation =
            "call \(message.interface ?? "").\(message.member ?? "") on \(message.path ?? "")"
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let usec = timeout.map(Self.microseconds) ?? 0
        do {
            try LinuxSystemdError.check(operation) {
                // A retry after EINTR starts from a clean error.
                sd_bus_error_free(&error)
                return sd_bus_call(handle, message.handle, usec, &error, &reply)
            }
        } catch var failure {
            failure.busErrorName = error.name.map { String(cString: $0) }
            failure.busErrorMessage = error.message.map { String(cString: $0) }
            throw failure
        }
        guard let reply else { throw LinuxSystemdError(operation: operation, errno: .badMessage) }
        return SDBusMessage(adopting: reply)
    }

    /// Calls a method with the given arguments and returns the reply's values
    /// (`sd_bus_message_new_method_call`, `sd_bus_message_append_basic`, `sd_bus_call`).
    public func callMethod(
        destination: String, path: String, interface: String, member: String,
        arguments: [SDBusValue] = [], timeout: Duration? = nil
    ) throws(LinuxSystemdError) -> [SDBusValue] {
        let message = try newMethodCall(destination: destination, path: path, interface: interface, member: member)
        try message.append(arguments)
        return try call(message, timeout: timeout).readAll()
    }

    /// Connects to the user's session bus (`sd_bus_open_user`; honours `DBUS_SESSION_BUS_ADDRESS`).
    public static func openUser() throws(LinuxSystemdError) -> SDBus {
        var bus: OpaquePointer?
        try LinuxSystemdError.check("sd_bus_open_user") { sd_bus_open_user(&bus) }
        guard let bus else { throw LinuxSystemdError(operation: "sd_bus_open_user", errno: .invalidArgument) }
        return SDBus(handle: bus)
    }

    /// Takes a well-known name (`sd_bus_request_name`, flags 0: fails when someone else has it).
    public func requestName(_ name: String) throws(LinuxSystemdError) {
        try LinuxSystemdError.check("sd_bus_request_name \(name)") { sd_bus_request_name(handle, name, 0) }
    }

    /// Serves every method call to `path` (`sd_bus_add_object`): `handler` runs inside `process()`,
    /// answers with `reply` or `replyError`, and returns false for a call it does not know (sd-bus
    /// then answers UnknownMethod).
    public func addObject(path: String, handler: @escaping (SDBusMessage) -> Bool) throws(LinuxSystemdError) {
        let box = ObjectHandler(handler)
        objectHandlers.append(box)
        try LinuxSystemdError.check("sd_bus_add_object \(path)") {
            sd_bus_add_object(
                handle, nil, path,
                { message, userdata, _ in
                    guard let message, let userdata else { return 0 }
                    let box = Unmanaged<ObjectHandler>.fromOpaque(userdata).takeUnretainedValue()
                    return box.handler(SDBusMessage(retaining: message)) ? 1 : 0
                },
                Unmanaged.passUnretained(box).toOpaque())
        }
    }

    /// Answers a method call with `values` (`sd_bus_message_new_method_return`, `sd_bus_send`).
    public func reply(to call: SDBusMessage, _ values: [SDBusValue] = []) throws(LinuxSystemdError) {
        guard call.expectsReply else { return }
        var reply: OpaquePointer?
        try LinuxSystemdError.check("sd_bus_message_new_method_return") { sd_bus_message_new_method_return(call.handle, &reply) }
        guard let reply else { throw LinuxSystemdError(operation: "sd_bus_message_new_method_return", errno: .invalidArgument) }
        let message = SDBusMessage(adopting: reply)
        try message.append(values)
        try send(message)
    }

    /// Answers a method call with the D-Bus error `name` (`sd_bus_error_set`, `sd_bus_reply_method_error`).
    public func replyError(to call: SDBusMessage, name: String, message: String) throws(LinuxSystemdError) {
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        sd_bus_error_set(&error, name, message)
        try LinuxSystemdError.check("sd_bus_reply_method_error \(name)") { sd_bus_reply_method_error(call.handle, &error) }
    }

    /// Emits a signal from `path` (`sd_bus_message_new_signal`, `sd_bus_send`).
    public func emitSignal(path: String, interface: String, member: String, _ values: [SDBusValue] = []) throws(LinuxSystemdError) {
        var signal: OpaquePointer?
        try LinuxSystemdError.check("sd_bus_message_new_signal \(interface).\(member)") {
            sd_bus_message_new_signal(handle, &signal, path, interface, member)
        }
        guard let signal else { throw LinuxSystemdError(operation: "sd_bus_message_new_signal", errno: .invalidArgument) }
        let message = SDBusMessage(adopting: signal)
        try message.append(values)
        try send(message)
    }

    /// Queues a message (`sd_bus_send`); `flush` writes what is queued.
    public func send(_ message: SDBusMessage) throws(LinuxSystemdError) {
        try LinuxSystemdError.check("sd_bus_send") { sd_bus_send(handle, message.handle, nil) }
    }

    /// Writes out what is queued (`sd_bus_flush`).
    public func flush() throws(LinuxSystemdError) {
        try LinuxSystemdError.check("sd_bus_flush") { sd_bus_flush(handle) }
    }

    /// Sends a method call without waiting for its reply (`sd_bus_call_async` with no callback: the
    /// reply is dropped when it comes).
    public func callAsync(_ message: SDBusMessage) throws(LinuxSystemdError) {
        try LinuxSystemdError.check("sd_bus_call_async") { sd_bus_call_async(handle, nil, message.handle, nil, nil, 0) }
    }

    /// What to poll for this connection: its descriptor, events, and the monotonic deadline in
    /// microseconds sd-bus has for itself (nil: none) (`sd_bus_get_fd`, `sd_bus_get_events`, `sd_bus_get_timeout`).
    public func pollState() throws(LinuxSystemdError) -> (fd: Int32, events: Int16, deadlineMicroseconds: UInt64?) {
        let fd = try LinuxSystemdError.check("sd_bus_get_fd") { sd_bus_get_fd(handle) }
        let events = try LinuxSystemdError.check("sd_bus_get_events") { sd_bus_get_events(handle) }
        var deadline: UInt64 = 0
        _ = try LinuxSystemdError.check("sd_bus_get_timeout") { sd_bus_get_timeout(handle, &deadline) }
        return (fd, Int16(truncatingIfNeeded: events), deadline == UInt64.max ? nil : deadline)
    }

    /// Installs a match rule (`sd_bus_add_match`, which also sends AddMatch to the bus and waits for it).
    /// `handler` runs inside `process()` for each matching message, on the thread calling `process()`.
    public func addMatch(_ rule: String, handler: @escaping (SDBusMessage) -> Void) throws(LinuxSystemdError) {
        let box = MatchHandler(handler)
        matchHandlers.append(box)
        try LinuxSystemdError.check("sd_bus_add_match \(rule)") {
            sd_bus_add_match(
                handle, nil, rule,
                { message, userdata, _ in
                    guard let message, let userdata else { return 0 }
                    let box = Unmanaged<MatchHandler>.fromOpaque(userdata).takeUnretainedValue()
                    box.handler(SDBusMessage(retaining: message))
                    // 0: let other matches see the message too.
                    return 0
                },
                Unmanaged.passUnretained(box).toOpaque())
        }
    }

    /// Processes one pending message or other piece of work (`sd_bus_process`); false when idle.
    @discardableResult
    public func process() throws(LinuxSystemdError) -> Bool {
        try LinuxSystemdError.check("sd_bus_process") { sd_bus_process(handle, nil) } > 0
    }

    /// Calls `process()` until there is nothing left to do.
    public func processUntilIdle() throws(LinuxSystemdError) {
        while try process() {}
    }

    /// Waits until the connection has something to process or `timeout` passes (`sd_bus_wait`; nil waits
    /// forever). True when woken by I/O, false on timeout.
    @discardableResult
    public func wait(timeout: Duration?) throws(LinuxSystemdError) -> Bool {
        let usec = timeout.map(Self.microseconds) ?? UInt64.max
        return try LinuxSystemdError.check("sd_bus_wait") { sd_bus_wait(handle, usec) } > 0
    }

    /// `wait`, also returning when one of `descriptors` (borrowed; nil ones left out) becomes readable (a stop): poll(2) over the
    /// connection's descriptor (`sd_bus_get_fd`, `sd_bus_get_events`) and theirs, for at most the
    /// earlier of `timeout` and the connection's own deadline (`sd_bus_get_timeout`). True when woken
    /// by I/O on the connection.
    @discardableResult
    public func wait(timeout: Duration?, orUntilReadable descriptors: [FileDescriptor?]) throws(LinuxSystemdError) -> Bool {
        let fd = try LinuxSystemdError.check("sd_bus_get_fd") { sd_bus_get_fd(handle) }
        let events = try LinuxSystemdError.check("sd_bus_get_events") { sd_bus_get_events(handle) }
        var deadline: UInt64 = 0
        _ = try LinuxSystemdError.check("sd_bus_get_timeout") { sd_bus_get_timeout(handle, &deadline) }
        var wait: Int64 = timeout.map { Int64(Self.microseconds($0) / 1000) } ?? -1
        if deadline != UInt64.max {
            let nowMicroseconds = UInt64(ClockReading.microseconds(CLOCK_MONOTONIC))
            let left = deadline > nowMicroseconds ? Int64((deadline - nowMicroseconds + 999) / 1000) : 0
            wait = wait < 0 ? left : min(wait, left)
        }
        var pollers = [pollfd(fd: fd, events: Int16(truncatingIfNeeded: events), revents: 0)]
        pollers += descriptors.map { pollfd(fd: $0?.rawValue ?? -1, events: Int16(POLLIN), revents: 0) }
        // Not retried: an interrupted wait returns to the caller's loop, which takes the time left again.
        switch valueOrErrno(retryOnInterrupt: false, { poll(&pollers, nfds_t(pollers.count), wait < 0 ? -1 : Int32(clamping: wait)) }) {
        case .success(let ready): return ready > 0 && pollers[0].revents != 0
        case .failure(.interrupted): return false
        case .failure(let error): throw LinuxSystemdError(operation: "poll sd-bus", errno: error)
        }
    }

    static func microseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        if seconds < 0 { return 0 }
        // Round up so a short positive timeout never becomes 0 ("use the default" for sd_bus_call).
        let micros = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000)
        if micros.overflow { return UInt64.max - 1 }
        let fraction = UInt64((attoseconds + 999_999_999_999) / 1_000_000_000_000)
        return micros.partialValue + fraction
    }

    private final class ObjectHandler {
        let handler: (SDBusMessage) -> Bool
        init(_ handler: @escaping (SDBusMessage) -> Bool) { self.handler = handler }
    }

    private final class MatchHandler {
        let handler: (SDBusMessage) -> Void
        init(_ handler: @escaping (SDBusMessage) -> Void) { self.handler = handler }
    }
}

@available(*, unavailable, message: "sd-bus connections are not thread-safe; guard one with a Mutex")
extension SDBus: Sendable {}
