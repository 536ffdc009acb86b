import ArgumentParser
import CurfewCore
import CurfewLinux
import CurfewSync
import Foundation

/// `curfew pair` and `curfew join CODE`: two computers' parents trust each other's keys through the
/// shared folder, bound by a code shown on the first screen and typed on the second (`PairingCode`).
struct Pair: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Offer this computer's parent key to another computer of the shared folder.",
        discussion: """
            Prints a pairing code and this computer's parent key fingerprint, then waits for curfew join \
            CODE on the other computer. When it answers, both keys' fingerprints are shown; once you \
            confirm (or with --yes), the other computer's parent key is trusted here, and the other \
            computer trusts this one's when your confirmation reaches it. Only a computer that knows the \
            code can answer: whoever else can write the folder cannot slip in a key.
            """)

    @OptionGroup var location: LocationOptions
    @Option(name: .long, help: ArgumentHelp("Seconds to wait for the other computer (default 600).", valueName: "seconds"))
    var timeout: Double = 600
    @Flag(name: .long, help: "Trust the answering key without asking (after showing its fingerprint).") var yes = false

    func validate() throws {
        guard timeout > 0 && timeout <= 86400 else { throw ValidationError("timeout must be between 1 and 86400 seconds, got \(timeout)") }
    }

    func run() throws {
        let workspace = Workspace(location)
        try workspace.requireInitialised()
        let parent = try workspace.keyRing.loadSigningKey()
        let code = SharedDirectory.newPairingCode()
        let nonce = SharedDirectory.newNonce()
        let now = Workspace.now()
        let offer = try publishPairingStep(
            .offer, nonce: nonce, code: code, over: PairingCode.offerMessage(nonce: nonce, parentKey: parent.publicKey.base64),
            parent: parent, time: now.seconds, expires: now.seconds + Int64(timeout.rounded(.up)), workspace: workspace)
        defer { workspace.shared.removePairing(nonce: nonce) }
        Output.lineNow("pairing code: \(PairingCode.display(code))")
        Output.lineNow("this computer's parent key: \(parent.id), fingerprint \(KeyFingerprint.text(of: parent.publicKey))")
        Output.lineNow("on the other computer, once the folder has synced: curfew join \(PairingCode.display(code))")
        let deadline = Date().addingTimeInterval(timeout)
        let answer = waitForPairingStep(in: workspace, until: deadline) {
            workspace.shared.pairingAnswer(nonce: nonce, code: code, offerKey: parent.publicKey.base64)
        }
        guard let (message, key) = answer else {
            throw CLIError("no computer joined within \(String(format: "%g", timeout)) s; nothing trusted (the offer is withdrawn)", .notConfirmed)
        }
        Output.lineNow(
            "\(UntrustedText.terminal(message.host)) answered with parent key \(key.id), fingerprint \(KeyFingerprint.text(of: key))")
        Output.lineNow("check that the other screen shows the same two fingerprints")
        try confirmPairedKey(key, host: message.host, workspace: workspace, yes: yes)
        try trustPairedKey(key, host: message.host, workspace: workspace)
        // The other computer trusts this one's key only when this confirmation reaches it.
        _ = try publishPairingStep(
            .accepted, nonce: nonce, code: code,
            over: PairingCode.acceptedMessage(nonce: nonce, offerKey: parent.publicKey.base64, answerKey: message.parentKey),
            parent: parent, time: Workspace.now().seconds, expires: offer.expires, workspace: workspace)
        Output.lineNow("confirmed; the other computer trusts this computer's parent key once this reaches it")
    }
}

struct Join: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Answer another computer's curfew pair with its code: the parents' keys are exchanged.",
        discussion: """
            Waits until the offer of CODE has reached the shared folder, shows both parent keys' \
            fingerprints, and once you confirm (or with --yes) answers with this computer's parent key. \
            The other computer trusts it once its parent confirms there; this computer trusts the other's \
            key only when that confirmation comes back (within --timeout, or until the offer expires).
            """)

    @OptionGroup var location: LocationOptions
    @Argument(help: "The pairing code curfew pair printed on the other computer.") var code: String
    @Option(name: .long, help: ArgumentHelp("Seconds to wait for the offer to sync (default 120).", valueName: "seconds"))
    var timeout: Double = 120
    @Flag(name: .long, help: "Trust the offered key without asking (after showing its fingerprint).") var yes = false

    func validate() throws {
        guard timeout >= 0 && timeout <= 86400 else { throw ValidationError("timeout must be between 0 and 86400 seconds, got \(timeout)") }
    }

    func run() throws {
        guard let code = PairingCode.normalize(code) else {
            throw CLIError(
                "pairing code must be \(PairingCode.length) letters and digits as curfew pair prints it (like 7KQM-4TXC-9PRD), got \(quoted(self.code))",
                .invalidArguments)
        }
        let workspace = Workspace(location)
        try workspace.requireInitialised()
        let parent = try workspace.keyRing.loadSigningKey()
        let deadline = Date().addingTimeInterval(timeout)
        let offer = waitForPairingStep(in: workspace, until: deadline) {
            workspace.shared.pairingOffers(code: code, now: Workspace.now()).first
        }
        guard let (message, key) = offer else {
            throw CLIError(
                "no pairing offer for this code in \(workspace.shared.pairingPath) within \(String(format: "%g", timeout)) s (has the folder synced? did curfew pair stop waiting?)",
                .unavailable)
        }
        guard key != parent.publicKey else {
            throw CLIError("the offer of this code carries this computer's own parent key: run curfew join on the other computer", .invalidArguments)
        }
        Output.lineNow(
            "\(UntrustedText.terminal(message.host)) offers parent key \(key.id), fingerprint \(KeyFingerprint.text(of: key))")
        Output.lineNow("this computer's parent key: \(parent.id), fingerprint \(KeyFingerprint.text(of: parent.publicKey))")
        Output.lineNow("check that the other screen shows the same two fingerprints")
        try confirmPairedKey(key, host: message.host, workspace: workspace, yes: yes)
        _ = try publishPairingStep(
            .answer, nonce: message.nonce, code: code,
            over: PairingCode.answerMessage(nonce: message.nonce, offerKey: message.parentKey, answerKey: parent.publicKey.base64),
            parent: parent, time: Workspace.now().seconds, expires: message.expires, workspace: workspace)
        Output.lineNow("answered; waiting for the other computer's parent to confirm there")
        // Trusted only once the other parent confirmed: their acceptance, signed by the offered key and
        // bound by the code to both keys. Until the offer expires (plus a minute for the folder to
        // sync), or this command's own timeout if later.
        let acceptDeadline = max(Date().addingTimeInterval(timeout), Date(timeIntervalSince1970: TimeInterval(message.expires + 60)))
        let accepted = waitForPairingStep(in: workspace, until: acceptDeadline) {
            workspace.shared.pairingAcceptance(
                nonce: message.nonce, code: code, offerKey: message.parentKey, answerKey: parent.publicKey.base64)
        }
        guard accepted != nil else {
            workspace.shared.removePairing(nonce: message.nonce, kinds: [.answer])
            throw CLIError(
                "the other computer's parent did not confirm this computer's key in time; nothing trusted (the answer is withdrawn)",
                .notConfirmed)
        }
        workspace.shared.removePairing(nonce: message.nonce, kinds: [.accepted])
        try trustPairedKey(key, host: message.host, workspace: workspace)
        // This computer counts on the other one as soon as its enrolment (by this parent key) arrives there.
        let machine = try MachineIdentity.load(stateDirectory: workspace.stateDirectory, override: SyncSetup.machineIDOverride)
        _ = try workspace.shared.publish(machine.announcement)
        if let author = try workspace.shared.enrolWithOwnParentKey(machine, now: Workspace.now()) {
            Output.lineNow("enrolled this computer (\(machine.id)) with parent key \(author)")
        }
        Output.lineNow("both parents confirmed: the computers trust each other's parent keys")
    }
}

/// What `look` finds in the shared folder's pairing directory, looked for again whenever the directory
/// changes (and every second where the folder is on a network filesystem), until `deadline`.
func waitForPairingStep<Found>(in workspace: Workspace, until deadline: Date, _ look: () -> Found?) -> Found? {
    DirectoryWatch.lookUntilFound(
        in: workspace.shared.pairingPath, remainingMilliseconds: { Int64((deadline.timeIntervalSinceNow * 1000).rounded(.up)) }, look)
}

/// Writes this computer's pairing step `kind` to the shared folder: its parent key, signed by that key,
/// with the code's HMAC over `authenticated`.
func publishPairingStep(
    _ kind: PairingMessage.Kind, nonce: String, code: String, over authenticated: [UInt8], parent: SigningKey, time: Int64,
    expires: Int64, workspace: Workspace
) throws -> PairingMessage {
    let message = PairingMessage(
        kind: kind, nonce: nonce, host: MachineIdentity.hostName(), parentKey: parent.publicKey.base64, keyId: parent.id,
        mac: SharedDirectory.pairingMAC(code: code, authenticated), time: time, expires: expires)
    try workspace.shared.publish(message, signedBy: parent)
    return message
}

/// Refuses a revoked key, then asks (unless `yes`) whether to trust `key`.
func confirmPairedKey(_ key: PublicKey, host: String, workspace: Workspace, yes: Bool) throws {
    if let revocation = try workspace.keyRing.revocations()[key.id] {
        throw CLIError("key \(key.id) was revoked at \(utcTimestamp(revocation.time)) and cannot be trusted again", .notPermitted)
    }
    guard yes || Output.confirm("Trust parent key \(key.id) of \(UntrustedText.terminal(host))? Records it signs will be enforced here.") else {
        throw CLIError("not confirmed; nothing trusted", .failure)
    }
}

/// Trusts `key` (confirmed by `confirmPairedKey`).
func trustPairedKey(_ key: PublicKey, host: String, workspace: Workspace) throws {
    if try workspace.keyRing.trustedKeys()[key.id] != nil {
        Output.lineNow("parent key \(key.id) was already trusted here")
        return
    }
    try workspace.keyRing.trust(key)
    Output.lineNow("trusted parent key \(key.id) of \(UntrustedText.terminal(host))")
}
