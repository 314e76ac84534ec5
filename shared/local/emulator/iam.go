package emulator

import (
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/karpless/karpless/functions"
)

// Identity is an emulated IAM principal: the static access key a function
// uses locally, the role it stands for, and what an EKS access entry for
// that role gives it in the cluster.
type Identity struct {
	// Name is the function (provisioner, disruption, interruption,
	// bootstrap) or operator.
	Name            string
	AccessKeyID     string
	SecretAccessKey string
	RoleARN         string
	// Username and Groups are what the TokenReview webhook answers.
	Username string
	Groups   []string
}

// ControllersGroup is the Kubernetes group of the controller functions'
// access entries; the bootstrap function and the operator get system:masters.
const ControllersGroup = "karpless:controllers"

// WatcherGroup is the watcher function's access entry's group: read-only
// grants of its own.
const WatcherGroup = "karpless:watcher"

// IdentityNames are the identities of the default world.
var IdentityNames = append(functions.Names(), "operator")

func defaultIdentities(account, cluster string) []Identity {
	var out []Identity
	for _, n := range IdentityNames {
		key := strings.ToUpper("LOCAL" + n + "XXXXXXXXXXXXXXXX")[:16]
		role := fmt.Sprintf("arn:aws:iam::%s:role/%s-karpless-%s", account, cluster, n)
		groups := []string{ControllersGroup}
		switch n {
		case "bootstrap", "operator":
			groups = []string{"system:masters"}
		case functions.Watcher:
			groups = []string{WatcherGroup}
		}
		out = append(out, Identity{
			Name: n, AccessKeyID: "AKIA" + key, SecretAccessKey: "localaws/" + n + "/not-a-secret",
			RoleARN: role, Username: sessionARN(account, roleNameOf(role), n), Groups: groups,
		})
	}
	return out
}

func roleNameOf(arn string) string { return arn[strings.LastIndexByte(arn, '/')+1:] }

func sessionARN(account, role, session string) string {
	return fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", account, role, session)
}

// Identities lists the known principals, by name.
func (e *Emulator) Identities() []Identity {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Identity
	for _, id := range e.world.identities {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Identity returns a principal by name.
func (e *Emulator) Identity(name string) (Identity, bool) {
	for _, id := range e.Identities() {
		if id.Name == name {
			return id, true
		}
	}
	return Identity{}, false
}

// AddIdentity registers a principal (and its role).
func (e *Emulator) AddIdentity(id Identity) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.world.identities[id.AccessKeyID] = id
	e.addRole(roleNameOf(id.RoleARN), "/")
}

var credentialPattern = regexp.MustCompile(`Credential=([A-Z0-9]+)/`)

// caller finds the identity that signed a request; callers hold e.mu.
func (e *Emulator) caller(hr *http.Request) (Identity, bool) {
	key := ""
	if m := credentialPattern.FindStringSubmatch(hr.Header.Get("Authorization")); m != nil {
		key = m[1]
	} else if c := hr.URL.Query().Get("X-Amz-Credential"); c != "" {
		key, _, _ = strings.Cut(c, "/")
	}
	id, ok := e.world.identities[key]
	return id, ok
}

func (e *Emulator) callerARN(r *request) string {
	if r.http != nil {
		if id, ok := e.caller(r.http); ok {
			return sessionARN(e.cfg.AccountID, roleNameOf(id.RoleARN), id.Name)
		}
	}
	return fmt.Sprintf("arn:aws:iam::%s:root", e.cfg.AccountID)
}

// --- STS ---

var stsHandlers = map[string]handlerFunc{
	"GetCallerIdentity": (*Emulator).getCallerIdentity,
}

func (e *Emulator) getCallerIdentity(r *request) (any, *apiError) {
	id, ok := e.caller(r.http)
	if !ok {
		return nil, errorf(403, "InvalidClientTokenId", "The security token included in the request is invalid.")
	}
	role := roleNameOf(id.RoleARN)
	return struct {
		Arn     string `xml:"Arn"`
		UserID  string `xml:"UserId"`
		Account string `xml:"Account"`
	}{sessionARN(e.cfg.AccountID, role, id.Name), e.roleID(role) + ":" + id.Name, e.cfg.AccountID}, nil
}

// --- IAM ---

var iamHandlers = map[string]handlerFunc{
	"CreateInstanceProfile":         (*Emulator).iamCreateInstanceProfile,
	"GetInstanceProfile":            (*Emulator).iamGetInstanceProfile,
	"DeleteInstanceProfile":         (*Emulator).iamDeleteInstanceProfile,
	"AddRoleToInstanceProfile":      (*Emulator).iamAddRole,
	"RemoveRoleFromInstanceProfile": (*Emulator).iamRemoveRole,
	"ListInstanceProfiles":          (*Emulator).iamListInstanceProfiles,
	"TagInstanceProfile":            (*Emulator).iamTagInstanceProfile,
	"UntagInstanceProfile":          (*Emulator).iamUntagInstanceProfile,
	"ListInstanceProfileTags":       (*Emulator).iamListInstanceProfileTags,
	"GetRole":                       (*Emulator).iamGetRole,
	"GetPolicy":                     (*Emulator).iamGetPolicy,
}

type iamRole struct {
	Name, Path, ID string
	Created        time.Time
}

type iamProfile struct {
	Name, Path, ID, account string
	Created                 time.Time
	Roles                   []string
	Tags                    map[string]string
	// propagatedAt is when EC2 first accepts the profile: IAM propagates
	// a new profile, and a role added to it, after a while
	// (Hostility.ProfilePropagationMin..Max).
	propagatedAt time.Time
}

func (p *iamProfile) arn() string {
	return fmt.Sprintf("arn:aws:iam::%s:instance-profile%s%s", p.account, p.Path, p.Name)
}

// InstanceProfile is an emulated IAM instance profile.
type InstanceProfile struct {
	Name, Path, ARN string
	Roles           []string
	Tags            map[string]string
}

// InstanceProfiles lists the instance profiles, for leak checks.
func (e *Emulator) InstanceProfiles() []InstanceProfile {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []InstanceProfile
	for _, n := range sortedKeys(e.world.profiles) {
		p := e.world.profiles[n]
		out = append(out, InstanceProfile{Name: p.Name, Path: p.Path, ARN: p.arn(), Roles: append([]string(nil), p.Roles...), Tags: cloneTags(p.Tags)})
	}
	return out
}

func (e *Emulator) addRole(name, path string) *iamRole {
	if r, ok := e.world.roles[name]; ok {
		return r
	}
	r := &iamRole{Name: name, Path: path, ID: "AROA" + strings.ToUpper(e.hexID("aroa", 17)), Created: e.now()}
	e.world.roles[name] = r
	return r
}

// AddRole makes an IAM role (path /), as a stack or a person would before
// an EC2NodeClass names it in spec.role; a role that exists is kept.
// Roles are strongly consistent: AddRoleToInstanceProfile sees it at once.
func (e *Emulator) AddRole(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.addRole(name, "/")
}

// AddInstanceProfile makes an instance profile holding role (which it
// makes too, if missing), as a person would for an EC2NodeClass's
// spec.instanceProfile. EC2 sees the profile only after IAM's propagation
// delay (Hostility.ProfilePropagationMin..Max), as with one made through
// the API. It fails if the profile exists.
func (e *Emulator) AddInstanceProfile(name, path, role string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if path == "" {
		path = "/"
	}
	if _, ok := e.world.profiles[name]; ok {
		return fmt.Errorf("instance profile %s already exists", name)
	}
	e.addRole(role, "/")
	p := &iamProfile{Name: name, Path: path, ID: "AIPA" + strings.ToUpper(e.hexID("aipa", 17)), account: e.cfg.AccountID,
		Created: e.now(), Tags: map[string]string{}, Roles: []string{role}}
	e.propagate(p)
	e.world.profiles[name] = p
	return nil
}

func (e *Emulator) roleID(name string) string {
	if r, ok := e.world.roles[name]; ok {
		return r.ID
	}
	return "AROAUNKNOWN"
}

func (e *Emulator) profileByNameOrARN(s string) *iamProfile {
	if s == "" {
		return nil
	}
	return e.world.profiles[s[strings.LastIndexByte(s, '/')+1:]]
}

type xmlRole struct {
	Path       string `xml:"Path"`
	RoleName   string `xml:"RoleName"`
	RoleID     string `xml:"RoleId"`
	Arn        string `xml:"Arn"`
	CreateDate string `xml:"CreateDate"`
}

type xmlIAMTag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type xmlProfile struct {
	Path                string      `xml:"Path"`
	InstanceProfileName string      `xml:"InstanceProfileName"`
	InstanceProfileID   string      `xml:"InstanceProfileId"`
	Arn                 string      `xml:"Arn"`
	CreateDate          string      `xml:"CreateDate"`
	Roles               []xmlRole   `xml:"Roles>member"`
	Tags                []xmlIAMTag `xml:"Tags>member"`
}

func (e *Emulator) xmlRole(r *iamRole) xmlRole {
	return xmlRole{Path: r.Path, RoleName: r.Name, RoleID: r.ID, Arn: fmt.Sprintf("arn:aws:iam::%s:role%s%s", e.cfg.AccountID, r.Path, r.Name), CreateDate: awsTime(r.Created)}
}

func (e *Emulator) xmlProfile(p *iamProfile) xmlProfile {
	x := xmlProfile{Path: p.Path, InstanceProfileName: p.Name, InstanceProfileID: p.ID, Arn: p.arn(), CreateDate: awsTime(p.Created), Tags: iamTags(p.Tags)}
	for _, rn := range p.Roles {
		if r, ok := e.world.roles[rn]; ok {
			x.Roles = append(x.Roles, e.xmlRole(r))
		}
	}
	return x
}

func iamTags(m map[string]string) []xmlIAMTag {
	var out []xmlIAMTag
	for _, k := range sortedKeys(m) {
		out = append(out, xmlIAMTag{k, m[k]})
	}
	return out
}

func noSuchEntity(format string, args ...any) *apiError {
	return errorf(404, "NoSuchEntity", format, args...)
}

func (e *Emulator) profileParam(r *request) (*iamProfile, *apiError) {
	name := r.params.Get("InstanceProfileName")
	if name == "" {
		return nil, errorf(400, "ValidationError", "1 validation error detected: Value null at 'instanceProfileName' failed to satisfy constraint: Member must not be null")
	}
	p, ok := e.world.profiles[name]
	if !ok {
		return nil, noSuchEntity("Instance Profile %s cannot be found.", name)
	}
	return p, nil
}

func (e *Emulator) iamCreateInstanceProfile(r *request) (any, *apiError) {
	name, path := r.params.Get("InstanceProfileName"), r.params.Get("Path")
	if name == "" {
		return nil, errorf(400, "ValidationError", "1 validation error detected: Value null at 'instanceProfileName' failed to satisfy constraint: Member must not be null")
	}
	if len(name) > 128 {
		return nil, errorf(400, "ValidationError", "instanceProfileName must be at most 128 characters")
	}
	if path == "" {
		path = "/"
	}
	if !strings.HasPrefix(path, "/") || !strings.HasSuffix(path, "/") || len(path) > 512 {
		return nil, errorf(400, "ValidationError", "The specified value for path is invalid. It must begin and end with / and contain only alphanumeric characters and/or / characters.")
	}
	if _, ok := e.world.profiles[name]; ok {
		return nil, errorf(409, "EntityAlreadyExists", "Instance Profile %s already exists.", name)
	}
	p := &iamProfile{Name: name, Path: path, ID: "AIPA" + strings.ToUpper(e.hexID("aipa", 17)), account: e.cfg.AccountID, Created: e.now(), Tags: tagList(r.params, "Tags.member")}
	e.propagate(p)
	e.world.profiles[name] = p
	return struct {
		InstanceProfile xmlProfile `xml:"InstanceProfile"`
	}{e.xmlProfile(p)}, nil
}

func (e *Emulator) iamGetInstanceProfile(r *request) (any, *apiError) {
	p, err := e.profileParam(r)
	if err != nil {
		return nil, err
	}
	return struct {
		InstanceProfile xmlProfile `xml:"InstanceProfile"`
	}{e.xmlProfile(p)}, nil
}

func (e *Emulator) iamDeleteInstanceProfile(r *request) (any, *apiError) {
	p, err := e.profileParam(r)
	if err != nil {
		return nil, err
	}
	if len(p.Roles) > 0 {
		return nil, errorf(409, "DeleteConflict", "Cannot delete entity, must remove roles from instance profile first.")
	}
	delete(e.world.profiles, p.Name)
	return nil, nil
}

func (e *Emulator) iamAddRole(r *request) (any, *apiError) {
	p, err := e.profileParam(r)
	if err != nil {
		return nil, err
	}
	role := r.params.Get("RoleName")
	if _, ok := e.world.roles[role]; !ok {
		return nil, noSuchEntity("The role with name %s cannot be found.", role)
	}
	if len(p.Roles) > 0 {
		return nil, errorf(409, "LimitExceeded", "Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1")
	}
	p.Roles = append(p.Roles, role)
	e.propagate(p)
	return nil, nil
}

// propagate starts a profile's propagation to EC2 anew; callers hold e.mu.
func (e *Emulator) propagate(p *iamProfile) {
	h := e.hostile
	p.propagatedAt = e.now().Add(h.between(h.ProfilePropagationMin, h.ProfilePropagationMax))
}

// profileError is why EC2 rejects a launch with an instance profile (name
// or ARN): unknown to IAM, or not propagated yet. Callers hold e.mu.
func (e *Emulator) profileError(name string, now time.Time) (code, msg string) {
	p := e.profileByNameOrARN(name)
	if p != nil && !now.Before(p.propagatedAt) {
		return "", ""
	}
	if p != nil {
		e.hostile.note(EventProfilePropagation)
	}
	return "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name", name)
}

func (e *Emulator) iamRemoveRole(r *request) (any, *apiError) {
	p, err := e.profileParam(r)
	if err != nil {
		return nil, err
	}
	role := r.params.Get("RoleName")
	for k, x := range p.Roles {
		if x == role {
			p.Roles = append(p.Roles[:k], p.Roles[k+1:]...)
			return nil, nil
		}
	}
	return nil, noSuchEntity("The role with name %s cannot be found in instance profile %s.", role, p.Name)
}

func (e *Emulator) iamListInstanceProfiles(r *request) (any, *apiError) {
	prefix := r.params.Get("PathPrefix")
	if prefix == "" {
		prefix = "/"
	}
	var all []xmlProfile
	for _, n := range sortedKeys(e.world.profiles) {
		p := e.world.profiles[n]
		if strings.HasPrefix(p.Path, prefix) {
			all = append(all, e.xmlProfile(p))
		}
	}
	start, size := 0, 100
	if m := r.params.Get("Marker"); m != "" {
		n, ok := decodeToken(m)
		if !ok || n > len(all) {
			return nil, errorf(400, "ValidationError", "Invalid Marker")
		}
		start = n
	}
	if s := r.params.Get("MaxItems"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return nil, errorf(400, "ValidationError", "MaxItems must be between 1 and 1000")
		}
		size = n
	}
	out := struct {
		InstanceProfiles []xmlProfile `xml:"InstanceProfiles>member"`
		IsTruncated      bool         `xml:"IsTruncated"`
		Marker           string       `xml:"Marker,omitempty"`
	}{}
	end := min(len(all), start+size)
	out.InstanceProfiles = all[start:end]
	if end < len(all) {
		out.IsTruncated, out.Marker = true, encodeToken(end)
	}
	return out, nil
}

func (e *Emulator) iamTagInstanceProfile(r *request) (any, *apiError) {
	p, err := e.profileParam(r)
	if err != nil {
		return nil, err
	}
	tags := tagList(r.params, "Tags.member")
	if len(p.Tags)+len(tags) > 50 {
		return nil, errorf(409, "LimitExceeded", "The number of tags has reached the maximum limit.")
	}
	for k, v := range tags {
		p.Tags[k] = v
	}
	return nil, nil
}

func (e *Emulator) iamUntagInstanceProfile(r *request) (any, *apiError) {
	p, err := e.profileParam(r)
	if err != nil {
		return nil, err
	}
	for _, k := range list(r.params, "TagKeys.member") {
		delete(p.Tags, k)
	}
	return nil, nil
}

func (e *Emulator) iamListInstanceProfileTags(r *request) (any, *apiError) {
	p, err := e.profileParam(r)
	if err != nil {
		return nil, err
	}
	return struct {
		Tags        []xmlIAMTag `xml:"Tags>member"`
		IsTruncated bool        `xml:"IsTruncated"`
	}{iamTags(p.Tags), false}, nil
}

func (e *Emulator) iamGetRole(r *request) (any, *apiError) {
	name := r.params.Get("RoleName")
	role, ok := e.world.roles[name]
	if !ok {
		return nil, noSuchEntity("The role with name %s cannot be found.", name)
	}
	return struct {
		Role xmlRole `xml:"Role"`
	}{e.xmlRole(role)}, nil
}
