package emulator

import (
	"encoding/base64"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

var launchTemplateNamePattern = regexp.MustCompile(`^[a-zA-Z0-9().\-/_]{3,128}$`)

type xmlLaunchTemplate struct {
	CreateTime           string   `xml:"createTime"`
	CreatedBy            string   `xml:"createdBy"`
	DefaultVersionNumber int64    `xml:"defaultVersionNumber"`
	LatestVersionNumber  int64    `xml:"latestVersionNumber"`
	LaunchTemplateID     string   `xml:"launchTemplateId"`
	LaunchTemplateName   string   `xml:"launchTemplateName"`
	Tags                 []xmlTag `xml:"tagSet>item"`
}

func xmlLT(lt *launchTemplate, tags map[string]string) xmlLaunchTemplate {
	return xmlLaunchTemplate{
		CreateTime: awsTime(lt.CreateTime), CreatedBy: lt.CreatedBy, DefaultVersionNumber: 1, LatestVersionNumber: 1,
		LaunchTemplateID: lt.ID, LaunchTemplateName: lt.Name, Tags: xmlTags(tags),
	}
}

type launchTemplateResponse struct {
	ec2Meta
	LaunchTemplate xmlLaunchTemplate `xml:"launchTemplate"`
}

func (e *Emulator) createLaunchTemplate(r *request) (any, *apiError) {
	p := r.params
	name := p.Get("LaunchTemplateName")
	if name == "" {
		return nil, errorf(400, "MissingParameter", "The request must contain the parameter LaunchTemplateName")
	}
	if !launchTemplateNamePattern.MatchString(name) {
		return nil, errorf(400, "InvalidLaunchTemplateName.MalformedException", "A launch template name must be between 3 and 128 characters, and may contain letters, numbers, and the following characters: - ( ) . / _.'")
	}
	token := p.Get("ClientToken")
	if token != "" {
		if prev, ok := e.world.tokens["CreateLaunchTemplate/"+token]; ok {
			if prev.paramsKey != paramsKey(p) {
				return nil, errorf(400, "IdempotentParameterMismatch", "Client token %s was already used with different parameters.", token)
			}
			return prev.response, nil
		}
	}
	data := map[string][]string{}
	for k, v := range p {
		if rest, ok := strings.CutPrefix(k, "LaunchTemplateData."); ok {
			data[rest] = v
		}
	}
	if len(data) == 0 {
		return nil, errorf(400, "MissingParameter", "The request must contain the parameter LaunchTemplateData")
	}
	for _, lt := range e.world.lts {
		if lt.Name == name {
			return nil, errorf(400, "InvalidLaunchTemplateName.AlreadyExistsException", "Launch template name already in use.")
		}
	}
	dv := url.Values(data)
	lt := &launchTemplate{
		LaunchTemplate: LaunchTemplate{
			Name: name, ImageID: dv.Get("ImageId"), InstanceType: dv.Get("InstanceType"),
			SecurityGroupIDs: list(dv, "SecurityGroupId"), Tags: tagSpecs(p, "TagSpecification")["launch-template"],
			TagSpecs: tagSpecs(dv, "TagSpecification"), CreateTime: e.now(), CreatedBy: e.callerARN(r),
		},
		userDataB64: dv.Get("UserData"),
		volumes:     map[string]int64{},
		params:      data,
	}
	if lt.Tags == nil {
		lt.Tags = map[string]string{}
	}
	if err := checkTagKeys(lt.Tags); err != nil {
		return nil, err
	}
	for rt, tags := range lt.TagSpecs {
		if err := checkTagKeys(tags); err != nil {
			return nil, err
		}
		switch rt {
		case "instance", "volume", "network-interface", "spot-instances-request", "elastic-gpu":
		default:
			return nil, errorf(400, "InvalidParameterValue", "'%s' is not a valid taggable resource type for this operation.", rt)
		}
	}
	if err := checkTenancy(dv.Get("Placement.Tenancy")); err != nil {
		return nil, err
	}
	if v := dv.Get("IamInstanceProfile.Arn"); v != "" {
		lt.InstanceProfile = v
	} else {
		lt.InstanceProfile = dv.Get("IamInstanceProfile.Name")
	}
	if lt.userDataB64 != "" {
		raw, err := base64.StdEncoding.DecodeString(lt.userDataB64)
		if err != nil {
			return nil, errorf(400, "InvalidUserData.Malformed", "Invalid BASE64 encoding of user data.")
		}
		if len(raw) > 16384 {
			return nil, errorf(400, "InvalidParameterValue", "User data is limited to 16384 bytes")
		}
		lt.UserData = string(raw)
	}
	for _, m := range members(dv, "BlockDeviceMapping") {
		if n, err := strconv.ParseInt(dv.Get(m+".Ebs.VolumeSize"), 10, 64); err == nil {
			lt.volumes[dv.Get(m+".DeviceName")] = n
		}
	}
	if err := dryRun(p); err != nil {
		return nil, err
	}
	lt.ID = e.newID("lt")
	lt.visibleAt = lt.CreateTime.Add(e.hostile.upTo(e.hostile.LaunchTemplateLagMax))
	e.world.lts = append(e.world.lts, lt)
	resp := &launchTemplateResponse{LaunchTemplate: xmlLT(lt, lt.Tags)}
	if token != "" {
		e.world.tokens["CreateLaunchTemplate/"+token] = &idempotency{paramsKey: paramsKey(p), response: resp}
	}
	return resp, nil
}

func (e *Emulator) image(id string) *Image {
	for _, im := range e.world.images {
		if im.ID == id {
			return im
		}
	}
	return nil
}

type describeLaunchTemplatesResponse struct {
	ec2Meta
	LaunchTemplates []xmlLaunchTemplate `xml:"launchTemplates>item"`
	NextToken       string              `xml:"nextToken,omitempty"`
}

func (e *Emulator) describeLaunchTemplates(r *request) (any, *apiError) {
	ids, names := list(r.params, "LaunchTemplateId"), list(r.params, "LaunchTemplateName")
	for _, id := range ids {
		if lt := e.ltByID(id); lt == nil || e.ltLagging(lt) {
			return nil, errorf(400, "InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
		}
	}
	for _, n := range names {
		if lt := e.ltByName(n); lt == nil || e.ltLagging(lt) {
			return nil, errorf(400, "InvalidLaunchTemplateName.NotFoundException", "At least one of the launch templates specified in the request does not exist.")
		}
	}
	filters := parseFilters(r.params)
	var matched []*launchTemplate
	shown := map[string]map[string]string{} // tags as far as they propagated
	for _, lt := range e.world.lts {
		if (len(ids) > 0 && !contains(ids, lt.ID)) || (len(names) > 0 && !contains(names, lt.Name)) {
			continue
		}
		if len(ids) == 0 && len(names) == 0 && e.ltLagging(lt) {
			continue
		}
		get := func(name string) ([]string, bool) {
			switch name {
			case "launch-template-name":
				return []string{lt.Name}, true
			case "create-time":
				return []string{awsTime(lt.CreateTime)}, true
			}
			return nil, false
		}
		shown[lt.ID] = e.visibleTags(lt.ID, lt.Tags)
		ok, err := matchFilters(filters, get, shown[lt.ID])
		if err != nil {
			return nil, err
		}
		if ok {
			matched = append(matched, lt)
		}
	}
	page, next, err := paginate(matched, r.params, 0, 1, 200)
	if err != nil {
		return nil, err
	}
	resp := &describeLaunchTemplatesResponse{NextToken: next}
	for _, lt := range page {
		resp.LaunchTemplates = append(resp.LaunchTemplates, xmlLT(lt, shown[lt.ID]))
	}
	return resp, nil
}

func (e *Emulator) deleteLaunchTemplate(r *request) (any, *apiError) {
	id, name := r.params.Get("LaunchTemplateId"), r.params.Get("LaunchTemplateName")
	var lt *launchTemplate
	switch {
	case id != "":
		if lt = e.ltByID(id); lt == nil {
			return nil, errorf(400, "InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
		}
	case name != "":
		if lt = e.ltByName(name); lt == nil {
			return nil, errorf(400, "InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name %s, does not exist.", name)
		}
	default:
		return nil, errorf(400, "MissingParameter", "The request must contain the parameter launchTemplateName or launchTemplateId")
	}
	if err := dryRun(r.params); err != nil {
		return nil, err
	}
	for k, x := range e.world.lts {
		if x == lt {
			e.world.lts = append(e.world.lts[:k], e.world.lts[k+1:]...)
			break
		}
	}
	delete(e.world.tagViews, lt.ID)
	return &launchTemplateResponse{LaunchTemplate: xmlLT(lt, lt.Tags)}, nil
}

func (e *Emulator) ltByID(id string) *launchTemplate {
	for _, lt := range e.world.lts {
		if lt.ID == id {
			return lt
		}
	}
	return nil
}

// ltLagging reports that a new launch template is not visible yet, and
// counts it; callers hold e.mu.
func (e *Emulator) ltLagging(lt *launchTemplate) bool {
	if e.now().Before(lt.visibleAt) {
		e.hostile.note(EventLaunchTemplateLag)
		return true
	}
	return false
}

func (e *Emulator) ltByName(name string) *launchTemplate {
	for _, lt := range e.world.lts {
		if lt.Name == name {
			return lt
		}
	}
	return nil
}
